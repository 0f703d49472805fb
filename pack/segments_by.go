package pack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
)

// A time series in a table (one row per entity and time step: entity, timestamp, features...)
// becomes, with --segments-by ENTITY, a dataset of rows of its feature columns in input order
// and the entities' row ranges as segments (layout.SegmentsName), so that blockfs mount
// --window L serves windows of L rows that never cross an entity: no conversion by hand and no
// metadata file. The table must be sorted by entity (each entity's rows together); one that is
// not is refused, with the command that sorts it.

// SegmentsResult says what PackSegmented did.
type SegmentsResult struct {
	Manifest  *layout.Manifest
	Segments  int
	Features  []string // the columns each row holds, in order
	BlockSize int64
}

// segment is one entity's rows, as the segments file lists them.
type segment struct {
	Entity string `json:"entity"`
	Start  int64  `json:"start_row"`
	End    int64  `json:"end_row"`
}

// PackSegmented packs r's samples as rows of every field but the column by (all fixed-size,
// of one dtype) into a dataset at dst, in input order, with the runs of equal values of column
// by as its segments. It closes r.
func PackSegmented(ctx context.Context, r SampleReader, dst, by string, opt Options) (*SegmentsResult, error) {
	defer r.Close()
	specs := r.Fields()
	rows, err := planRows(specs, by)
	if err != nil {
		return nil, err
	}
	res := &SegmentsResult{BlockSize: opt.BlockSize}
	for _, i := range rows.features {
		res.Features = append(res.Features, specs[i].Name)
	}
	if res.BlockSize == 0 {
		_, total := r.Progress()
		res.BlockSize = AutoBlockSize(max(total, 1), rows.size)
	}
	w, err := layout.Create(dst, layout.WriterOptions{Kind: layout.Fixed, RecordSize: rows.size, BlockSize: max(res.BlockSize, rows.size),
		DType: rows.dtype, Shape: []int64{rows.size / rows.item}, Source: "table rows of " + strings.Join(res.Features, ", ") + ", segments by " + by,
		BlockDone: opt.BlockDone, Compress: opt.Compress}, opt.Force)
	if err != nil {
		return nil, err
	}
	sg := &segmenter{rows: rows, by: by, key: specs[rows.key], seen: map[string]int64{}}
	err = sg.pack(ctx, r, w, opt.Progress)
	if err == nil {
		err = writeSegments(w.TempDir(), by, sg.segs)
	}
	if err != nil {
		w.Abort()
		return nil, err
	}
	if res.Manifest, err = w.Commit(); err != nil {
		return nil, err
	}
	res.Segments = len(sg.segs)
	return res, nil
}

// tableRows is how PackSegmented makes rows of a table's samples: the entity column key, and
// the feature columns whose values, back to back, are a row of size bytes of dtype (item bytes
// an element).
type tableRows struct {
	key      int
	features []int
	dtype    string
	item     int64
	size     int64
}

// planRows checks the fields for rows of every field but column by, all fixed-size numbers of
// one dtype, and returns the plan.
func planRows(specs []FieldSpec, by string) (tableRows, error) {
	flag := optname.Flag("segments-by")
	t := tableRows{key: -1}
	for i, f := range specs {
		if f.Name == by {
			t.key = i
			continue
		}
		if f.Kind != FixedField || f.DType == "" {
			return t, fmt.Errorf("%s %s makes rows of the other columns for windows, so they must be numbers of fixed size; %s is %s: leave it out with %s",
				flag, by, f.Name, describeSpec(f), optname.Flag("columns"))
		}
		if t.dtype != "" && f.DType != t.dtype {
			return t, fmt.Errorf("%s %s makes rows of the other columns, which must have one dtype: %s is %s, %s is %s; choose columns of one type with %s",
				flag, by, specs[t.features[0]].Name, t.dtype, f.Name, f.DType, optname.Flag("columns"))
		}
		t.dtype = f.DType
		t.features = append(t.features, i)
		t.size += f.RecordSize
	}
	names := make([]string, 0, len(specs))
	for _, f := range specs {
		names = append(names, f.Name)
	}
	if t.key < 0 {
		return t, fmt.Errorf("%s %s: the input has no such column (it has %s)", flag, by, strings.Join(names, ", "))
	}
	if len(t.features) == 0 {
		return t, fmt.Errorf("%s %s: no other column to make rows of", flag, by)
	}
	var err error
	t.item, err = layout.DTypeSize(t.dtype)
	return t, err
}

// segmenter packs a table's rows in input order and lists its entities' row ranges.
type segmenter struct {
	rows tableRows
	by   string
	key  FieldSpec        // the entity column's
	segs []segment        // so far; the last is open
	seen map[string]int64 // entity -> its first row
	last string           // the entity of the row before, as bytes
}

// pack appends every sample of r to w as a row, checking ctx and reporting progress every
// 4096 rows; it refuses an input of no rows.
func (sg *segmenter) pack(ctx context.Context, r SampleReader, w *layout.Writer, progress func(done, total int64, records uint64)) error {
	buf := make([]byte, 0, sg.rows.size)
	var n int64
	for ; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if progress != nil {
				done, total := r.Progress()
				progress(done, total, uint64(n))
			}
		}
		values, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := sg.add(n, values[sg.rows.key]); err != nil {
			return err
		}
		buf = buf[:0]
		for _, i := range sg.rows.features {
			buf = append(buf, values[i]...)
		}
		if err := w.Append(uint64(n), buf); err != nil {
			return err
		}
	}
	if n == 0 {
		return fmt.Errorf("the input has no rows")
	}
	return nil
}

// add counts row n, of entity key, in its segment: the last one, or a new one. An entity seen
// before, with others between, is refused: the table must be sorted by it.
func (sg *segmenter) add(n int64, key []byte) error {
	entity := string(key)
	if len(sg.segs) == 0 || sg.last != entity {
		sg.last = entity
		if first, ok := sg.seen[entity]; ok {
			by := sg.by
			return fmt.Errorf("%s %s: the rows of %s %q are not together (rows %d and %d, with others between): the table must be sorted by %s; sort it first, e.g. duckdb -c \"COPY (SELECT * FROM 'in.parquet' ORDER BY %s, <time column>) TO 'sorted.parquet'\"",
				optname.Flag("segments-by"), by, by, printable(key, sg.key), first, n, by, by)
		}
		sg.seen[entity] = n
		sg.segs = append(sg.segs, segment{Entity: printable(key, sg.key), Start: n})
	}
	sg.segs[len(sg.segs)-1].End = n
	return nil
}

// writeSegments writes the segments file (layout.SegmentsName) into dir.
func writeSegments(dir, by string, segs []segment) error {
	doc, err := json.MarshalIndent(map[string]any{"column": by, "index_map": segs}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, layout.SegmentsName), append(doc, '\n'), 0o644)
}

// printable returns an entity's value as text: a number as its value, a string as it is,
// anything else in hex.
func printable(b []byte, f FieldSpec) string {
	if f.Kind == FixedField && f.DType != "" && len(b) <= 8 {
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		if f.DType[1] == 'i' && len(b) > 0 && b[len(b)-1]&0x80 != 0 {
			return fmt.Sprint(int64(v) - int64(1)<<(8*uint(len(b))))
		}
		return fmt.Sprint(v)
	}
	ok := true
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			ok = false
			break
		}
	}
	if ok {
		return string(b)
	}
	return fmt.Sprintf("%x", b)
}

// describeSpec says what a field is, for messages.
func describeSpec(f FieldSpec) string {
	if f.Kind == VariableField {
		return "of varying length"
	}
	if f.DType == "" {
		return "opaque bytes"
	}
	return f.DType
}
