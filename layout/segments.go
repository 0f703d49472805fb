package layout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/userfile"
)

// Limits on a segment map (--segments). Each segment is 16 bytes while it is read, and a
// windowed dataset whose short segments share blocks keeps 16 bytes for each (windows.runs):
// SegmentsName is the segments file a pack made with --segments-by keeps in its directory (the
// JSON index_map ReadSegments reads); a mount with --window uses it unless --segments names
// another.
const SegmentsName = "segments.json"

// MaxSegments of them stay within 16 MiB, a quarter of what a mount may take beside its cache.
// The file is read as a stream, never whole.
const (
	MaxSegments         = 1 << 20
	MaxSegmentsFileSize = 1 << 30 // 1 GiB of JSON (a .npy of MaxSegments int64 starts is 8 MiB)
)

// Segment is an inclusive range of rows [Start, End] (an entity of a time series).
type Segment struct{ Start, End int64 }

// exclusiveHint is what a segment error adds when the map looks as if its ends were exclusive.
const exclusiveHint = "; end_row is inclusive (the segment's last row): if the map's ends are exclusive, as Python's ranges are, subtract 1 from each end_row"

// checkSegments requires sorted, disjoint segments inside rows [0, n) (ReadSegments sorts
// what it reads).
func checkSegments(path string, segs []Segment, n int64) error {
	if len(segs) > MaxSegments {
		return tooManySegments(path, len(segs))
	}
	for i, s := range segs {
		switch {
		case s.Start < 0 || s.End < s.Start:
			return errorf(ErrFormat, path, -1, "segment %d [%d, %d] is empty or negative", i, s.Start, s.End)
		case s.End == n:
			return errorf(ErrFormat, path, -1, "segment %d [%d, %d] passes the end of the file (%d rows): the last is row %d%s", i, s.Start, s.End, n, n-1, exclusiveHint)
		case s.End > n:
			return errorf(ErrFormat, path, -1, "segment %d [%d, %d] passes the end of the file (%d rows)", i, s.Start, s.End, n)
		case i > 0 && s.Start < segs[i-1].Start:
			return errorf(ErrFormat, path, -1, "segment %d [%d, %d] comes before segment %d [%d, %d]: segments must be sorted by start row", i, s.Start, s.End, i-1, segs[i-1].Start, segs[i-1].End)
		case i > 0 && s.Start == segs[i-1].End:
			return errorf(ErrFormat, path, -1, "segment %d [%d, %d] starts on row %d, the last row of segment %d [%d, %d]%s", i, s.Start, s.End, s.Start, i-1, segs[i-1].Start, segs[i-1].End, exclusiveHint)
		case i > 0 && s.Start < segs[i-1].End:
			return errorf(ErrFormat, path, -1, "segment %d [%d, %d] overlaps segment %d [%d, %d]: segments must not overlap", i, s.Start, s.End, i-1, segs[i-1].Start, segs[i-1].End)
		}
	}
	return nil
}

func tooManySegments(path string, n int) error {
	return errorf(ErrFormat, path, -1, "more than %d segments (%d or more); blockfs keeps 16 bytes of state for each and allows at most %d: merge short segments, or serve the rows in place without %s",
		MaxSegments, n, MaxSegments, optname.Flag("segments"))
}

// ReadSegments reads a segment list for a file of rows rows, sorted by start row: a JSON file
// whose index_map lists entities with inclusive start_row and end_row (other keys are ignored;
// a top-level list of such entries is read the same), or a .npy of integer segment start rows
// (int32, int64 or narrower, either byte order; each segment ends where the next starts, the
// last at the last row). The file must be a regular file of at most MaxSegmentsFileSize bytes
// listing at most MaxSegments segments (a FIFO, a device such as /dev/zero, or a larger map is
// refused without waiting or reading on); JSON is decoded as a stream.
func ReadSegments(path string, rows int64) ([]Segment, error) {
	f, size, err := userfile.Open(path, MaxSegmentsFileSize)
	if err != nil {
		return nil, PathError(ErrFormat, path, err)
	}
	defer f.Close()
	if IsNpy(f) {
		return npySegments(path, f, size, rows)
	}
	segs, err := jsonSegments(path, json.NewDecoder(userfile.Reader(f, MaxSegmentsFileSize)))
	if err != nil {
		return nil, err
	}
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].Start < segs[j].Start })
	return segs, nil
}

// jsonSegments decodes a JSON segment map from dec, one entry at a time: an object whose
// index_map is the list (other keys are skipped token by token), or the list itself.
func jsonSegments(path string, dec *json.Decoder) ([]Segment, error) {
	notMap := func(err error) error {
		if errors.Is(err, userfile.ErrTooLarge) { // it grew while it was read
			return PathError(ErrFormat, path, err)
		}
		return errorf(ErrFormat, path, -1, "not a .npy of segment starts, nor JSON with an index_map list of {start_row, end_row} (%s)", jsonProblem(err))
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, notMap(err)
	}
	var segs []Segment
	found := false
	switch tok {
	case json.Delim('['):
		if segs, err = jsonEntries(path, dec); err != nil {
			return nil, err
		}
		found = true
	case json.Delim('{'):
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return nil, notMap(err)
			}
			if key != "index_map" {
				if err := skipValue(dec); err != nil {
					return nil, notMap(err)
				}
				continue
			}
			switch tok, err := dec.Token(); {
			case err != nil:
				return nil, notMap(err)
			case tok == nil: // "index_map": null
			case tok == json.Delim('['):
				if segs, err = jsonEntries(path, dec); err != nil {
					return nil, err
				}
				found = true
			default:
				return nil, notMap(fmt.Errorf("index_map is a JSON %s where a list was expected", tokenKind(tok)))
			}
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return nil, notMap(err)
		}
	default:
		return nil, notMap(fmt.Errorf("the document is a JSON %s where an object was expected", tokenKind(tok)))
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("more data after the JSON document")
		}
		return nil, notMap(err)
	}
	if !found {
		return nil, errorf(ErrFormat, path, -1, "the JSON has no index_map list of {start_row, end_row}")
	}
	return segs, nil
}

// jsonEntries decodes the entries of a list whose opening bracket dec has read, and its
// closing bracket.
func jsonEntries(path string, dec *json.Decoder) ([]Segment, error) {
	const missing = math.MinInt64 // no row is negative: a value left at this was not given
	var segs []Segment
	for i := 0; dec.More(); i++ {
		if i == MaxSegments {
			return nil, tooManySegments(path, i+1)
		}
		start, end := int64(missing), int64(missing)
		e := struct {
			Start *int64 `json:"start_row"`
			End   *int64 `json:"end_row"`
		}{&start, &end} // decoded in place: no allocation per entry
		if err := dec.Decode(&e); err != nil {
			return nil, errorf(ErrFormat, path, -1, "index_map entry %d: %s", i, jsonProblem(err))
		}
		if e.Start == nil || e.End == nil || start == missing || end == missing {
			return nil, errorf(ErrFormat, path, -1, "index_map entry %d has no start_row or end_row", i)
		}
		segs = append(segs, Segment{start, end})
	}
	if _, err := dec.Token(); err != nil {
		return nil, errorf(ErrFormat, path, -1, "index_map: %s", jsonProblem(err))
	}
	return segs, nil
}

// skipValue reads past the next JSON value of dec without keeping it.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// tokenKind names the JSON kind of a token (json.Decoder.Token).
func tokenKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		if tok == json.Delim('{') {
			return "object"
		}
		return "list"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "number"
}

// npySegments reads a .npy of segment start rows from f (size bytes).
func npySegments(path string, f io.ReaderAt, size, rows int64) ([]Segment, error) {
	npy, err := ParseNpy(path, f, size)
	if err != nil {
		return nil, err
	}
	n := npy.IntSize()
	if n == 0 {
		return nil, errorf(ErrFormat, path, -1, "segment starts must be a 1-D .npy of integers (int32 or int64), got %s with rows shaped %v", npy.DType, npy.Shape)
	}
	if npy.Records > MaxSegments {
		return nil, tooManySegments(path, int(min(npy.Records, math.MaxInt32)))
	}
	data := make([]byte, int64(n)*npy.Records)
	if _, err := f.ReadAt(data, npy.DataOffset); err != nil && !errors.Is(err, io.EOF) {
		return nil, PathError(ErrFormat, path, err)
	}
	starts := npy.Ints(data)
	slices.Sort(starts)
	segs := make([]Segment, len(starts))
	for i, st := range starts {
		segs[i] = Segment{Start: st, End: rows - 1}
		if i > 0 {
			segs[i-1].End = st - 1
		}
	}
	return segs, nil
}

// jsonProblem says what encoding/json found wrong in the user's terms, not Go's.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s is a JSON %s where %s was expected", orTop(te.Field), te.Value, jsonKind(te.Type.Kind()))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the JSON ends early"
	}
	return err.Error()
}

func orTop(field string) string {
	if field == "" {
		return "the document"
	}
	return field
}

// jsonKind names a Go kind as JSON does, with its article.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	}
	return "a number"
}
