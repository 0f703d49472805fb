package pack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/blockfs/blockfs/internal/userfile"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
)

// Format names an input format.
type Format string

const (
	Auto  Format = "auto"
	Raw   Format = "raw"   // flat file of fixed-size records
	Npy   Format = "npy"   // NumPy .npy, one record per row along the first axis
	Lines Format = "lines" // one record per line, without its '\n'
	Files Format = "files" // one record per regular file of a folder tree
)

// Formats lists the formats pack accepts.
var Formats = []Format{Auto, Raw, Npy, Lines, Files, Parquet, Arrow, WebDataset, TFRecord}

// ParseFormat checks a --format value.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("unknown format %q (want %s)", s, strings.Join(names, ", "))
}

// Detect picks the format of src for --format auto: a folder is files, the .npy magic is
// npy, .jsonl/.txt/.csv (and .ndjson, .tsv) are lines. Anything else needs --format.
func Detect(src string) (Format, error) {
	st, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("cannot read the input: %w", err)
	}
	if st.IsDir() {
		return Files, nil
	}
	if f, err := os.Open(src); err == nil {
		isNpy := layout.IsNpy(f)
		f.Close()
		if isNpy {
			return Npy, nil
		}
	}
	switch strings.ToLower(filepath.Ext(src)) {
	case ".jsonl", ".ndjson", ".txt", ".csv", ".tsv":
		return Lines, nil
	}
	return "", unknownFormatError{src}
}

// unknownFormatError is Detect's error when the input's format cannot be told.
type unknownFormatError struct{ src string }

func (e unknownFormatError) Error() string {
	return fmt.Sprintf("cannot tell the format of %s; give %s raw (with %s), npy, lines or files", e.src, optname.Flag("format"), optname.Flag("record-size"))
}

// input yields records in source order. A record is valid until the next call to next.
type input interface {
	next() (record, error)     // io.EOF after the last record
	name() string              // source name of the last record ("" if the format has none)
	describe(id uint64) string // the record with source id id, for errors: "line 7 of x.txt"
	size() int64               // total input bytes, for progress and bucket sizing
	close() error
}

// readBuffer is the size of the inputs' read buffers. A record larger than that is handed over
// as a section of the file holding it, so pack streams it and never holds it whole in memory.
const readBuffer = 4 << 20

// record is one record: its bytes when they fit in the read buffer, else where it lies in a
// file (read with ReadAt while the record is valid).
type record struct {
	b   []byte
	sec *io.SectionReader
}

// size returns the record's length.
func (r record) size() int64 {
	if r.sec != nil {
		return r.sec.Size()
	}
	return int64(len(r.b))
}

// element is what an input knows about its records' kind and shape.
type element struct {
	kind       layout.Kind
	recordSize int64
	dtype      string
	shape      []int64
}

// fixedInput reads fixed-size records from a range of a file: through a read buffer when
// they fit in it, else as sections of the file.
type fixedInput struct {
	f    *os.File
	r    *bufio.Reader
	sec  *io.SectionReader // the records, unbuffered (for ReadFixed and large records)
	rs   int64             // bytes per record
	n    int64             // bytes of records
	left int64             // records left
	// pending is the size of the record last returned by Peek, discarded on the next call.
	pending int
}

// openRaw opens a raw input of records of recordSize bytes; empty: as for openRegular.
func openRaw(src string, recordSize int64, empty bool) (input, element, error) {
	if recordSize <= 0 {
		return nil, element{}, fmt.Errorf("%s is required for raw input (the size of one record in bytes)", optname.Flag("record-size"))
	}
	f, st, err := openRegular(src, empty)
	if err != nil {
		return nil, element{}, err
	}
	if st.Size()%recordSize != 0 {
		f.Close()
		return nil, element{}, fmt.Errorf("%s is %d bytes, not a multiple of the record size %d (%d bytes left over); check %s", src, st.Size(), recordSize, st.Size()%recordSize, optname.Flag("record-size"))
	}
	return newFixedInput(f, 0, st.Size(), recordSize), element{kind: layout.Fixed, recordSize: recordSize}, nil
}

// openNpy opens a .npy input. One of no rows is refused unless empty says it may be (one of
// several inputs, which adds no records).
func openNpy(src string, recordSize int64, empty bool) (input, element, error) {
	f, st, err := openRegular(src, false) // a .npy has its header
	if err != nil {
		return nil, element{}, err
	}
	npy, err := layout.ParseNpy(src, f, st.Size())
	if err != nil {
		f.Close()
		return nil, element{}, err
	}
	if recordSize != 0 && recordSize != npy.RecordSize {
		f.Close()
		return nil, element{}, fmt.Errorf("%s %d disagrees with the .npy rows of %d bytes (%s %v)", optname.Flag("record-size"), recordSize, npy.RecordSize, npy.DType, npy.Shape)
	}
	if npy.Records == 0 && !empty {
		f.Close()
		return nil, element{}, fmt.Errorf("%s holds no records (its first axis is 0): nothing to pack", src)
	}
	in := newFixedInput(f, npy.DataOffset, npy.Records*npy.RecordSize, npy.RecordSize)
	return in, element{kind: layout.Fixed, recordSize: npy.RecordSize, dtype: npy.DType, shape: npy.Shape}, nil
}

func newFixedInput(f *os.File, off, n, rs int64) *fixedInput {
	sec := io.NewSectionReader(f, off, n)
	in := &fixedInput{f: f, sec: sec, rs: rs, n: n, left: n / rs}
	if rs <= readBuffer {
		in.r = bufio.NewReaderSize(sec, readBuffer)
	}
	return in
}

// next returns the next record: a view of the read buffer (no copy) when it fits in it, else
// its section of the file.
func (in *fixedInput) next() (record, error) {
	if in.left == 0 {
		return record{}, io.EOF
	}
	i := in.n/in.rs - in.left
	in.left--
	if in.r == nil {
		return record{sec: io.NewSectionReader(in.sec, i*in.rs, in.rs)}, nil
	}
	if in.pending > 0 {
		_, _ = in.r.Discard(in.pending)
		in.pending = 0
	}
	rec, err := in.r.Peek(int(in.rs))
	if err != nil {
		return record{}, fmt.Errorf("reading %s: %w", in.f.Name(), err)
	}
	in.pending = len(rec)
	return record{b: rec}, nil
}

func (in *fixedInput) name() string { return "" }
func (in *fixedInput) describe(id uint64) string {
	return fmt.Sprintf("record %d of %s", id, in.f.Name())
}
func (in *fixedInput) size() int64  { return in.n }
func (in *fixedInput) close() error { return in.f.Close() }

// linesInput reads one record per line. The record is the line without its '\n' (a '\r'
// before it is kept); a last line without '\n' is a record too. With a header, the first line
// is skipped: record 0 is the second line.
type linesInput struct {
	f      *os.File
	r      *bufio.Reader
	n      int64
	pos    int64 // offset in f of the next line
	header bool  // the first line was skipped (describe counts it)
}

// openLines opens a text input, a record a line; empty: as for openRegular, and a header with
// no line after it is no records too.
func openLines(src string, skipHeader, empty bool) (input, element, error) {
	f, st, err := openRegular(src, empty)
	if err != nil {
		return nil, element{}, err
	}
	in := &linesInput{f: f, r: bufio.NewReaderSize(f, readBuffer), n: st.Size()}
	if skipHeader && st.Size() > 0 {
		if err := in.skipLine(); err != nil {
			f.Close()
			return nil, element{}, err
		}
		if _, err := in.r.Peek(1); errors.Is(err, io.EOF) && !empty {
			f.Close()
			return nil, element{}, fmt.Errorf("%s has no lines after its header (%s): nothing to pack", src, optname.Flag("skip-header"))
		}
		in.n -= in.pos // the records' bytes, for progress and the pre-shuffle's buckets
	}
	return in, element{kind: layout.Variable}, nil
}

// skipLine reads past the first line, however long.
func (in *linesInput) skipLine() error {
	in.header = true
	for {
		chunk, err := in.r.ReadSlice('\n')
		in.pos += int64(len(chunk))
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
		case err == nil, errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("reading %s: %w", in.f.Name(), err)
		}
	}
}

// next returns the next line: a view of the read buffer (no copy) when it fits in it, else
// its section of the file.
func (in *linesInput) next() (record, error) {
	start := in.pos
	line, err := in.r.ReadSlice('\n')
	in.pos += int64(len(line))
	switch {
	case err == nil:
		return record{b: line[:len(line)-1]}, nil
	case errors.Is(err, bufio.ErrBufferFull):
		return in.long(start)
	case errors.Is(err, io.EOF) && len(line) > 0:
		return record{b: line}, nil
	case errors.Is(err, io.EOF):
		return record{}, io.EOF
	default:
		return record{}, fmt.Errorf("reading %s: %w", in.f.Name(), err)
	}
}

// long finds the end of a line that starts at start and fills the read buffer, and returns
// the line as a section of the file: it is read again from there, a buffer at a time, when it
// is packed.
func (in *linesInput) long(start int64) (record, error) {
	for {
		chunk, err := in.r.ReadSlice('\n')
		in.pos += int64(len(chunk))
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
		case err == nil:
			return record{sec: io.NewSectionReader(in.f, start, in.pos-1-start)}, nil
		case errors.Is(err, io.EOF):
			return record{sec: io.NewSectionReader(in.f, start, in.pos-start)}, nil
		default:
			return record{}, fmt.Errorf("reading %s: %w", in.f.Name(), err)
		}
	}
}

func (in *linesInput) name() string { return "" }
func (in *linesInput) describe(id uint64) string {
	line := id + 1
	if in.header {
		line++
	}
	return fmt.Sprintf("line %d of %s", line, in.f.Name())
}
func (in *linesInput) size() int64  { return in.n }
func (in *linesInput) close() error { return in.f.Close() }

// filesInput reads one record per regular file under a folder, in sorted path order: the
// entries of each directory sorted by name, depth first (as filepath.WalkDir visits them).
// Symlinks and other non-regular files are skipped, and so are the files and folders that sel
// leaves out. Names are '/'-separated relative paths. Each file is opened relative to dir
// (openBeneath), the folder as it was when it was listed.
type filesInput struct {
	root  string
	dir   *os.File    // root, opened before it was listed; nil until next opens it, for a part's share
	files []inputFile // the files still to read, in order: their relative paths and listed sizes
	cur   string
	buf   []byte
	n     int64
	open  *os.File // the file of the last record, when it is handed over as a section
}

// openFiles lists the folder src: the files that sel takes, in order.
func openFiles(src string, sel *selection) (input, element, error) {
	in := &filesInput{root: src}
	// Opened before the listing, so that the files read are those of the folder listed, even if
	// src is replaced since; an error is said below, after the listing's own (src missing, or
	// no folder: no files).
	dir, dirErr := os.OpenFile(src, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	in.dir = dir
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("cannot list %s: %w", p, unwrap(err))
		}
		if p == src {
			return nil // the folder itself is never skipped, whatever its name
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			if sel.skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		case !d.Type().IsRegular():
			sel.skipped.Special++
			return nil
		case !sel.takeFile(rel, d.Name()):
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("cannot stat %s: %w", p, unwrap(err))
		}
		if strings.ContainsAny(rel, "\n\x00") {
			return fmt.Errorf("the name %q contains a newline; rename the file, or leave it out with %s", rel, optname.Flag("exclude"))
		}
		in.files = append(in.files, inputFile{path: rel, size: info.Size()})
		in.n += info.Size()
		return nil
	})
	switch {
	case err != nil:
	case len(in.files) == 0 && sel.skipped.String() != "":
		err = fmt.Errorf("%s holds no files to pack: %s", src, sel.skipped.String())
	case len(in.files) == 0:
		err = fmt.Errorf("%s holds no regular files: nothing to pack", src)
	case dirErr != nil:
		err = fmt.Errorf("cannot list %s: %w", src, unwrap(dirErr))
	}
	if err != nil {
		in.close()
		return nil, element{}, err
	}
	return in, element{kind: layout.Variable}, nil
}

// next returns the next file's contents: read into a buffer when the file fits in the read
// buffer, else as a section of the file, which stays open until the next call.
func (in *filesInput) next() (record, error) {
	if err := in.closeRecord(); err != nil {
		return record{}, err
	}
	if len(in.files) == 0 {
		return record{}, io.EOF
	}
	in.cur, in.files = in.files[0].path, in.files[1:]
	p := filepath.Join(in.root, filepath.FromSlash(in.cur))
	if in.dir == nil { // a part's share, listed by listInputs
		dir, err := os.OpenFile(in.root, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return record{}, fmt.Errorf("cannot read %s: %w", p, unwrap(err))
		}
		in.dir = dir
	}
	// No symlink followed, in any component: the listing left symlinks out, and one put in the
	// place of a listed file or of a folder on its path since (by anyone who can write in the
	// folder) would have this pack copy whatever it points at, a file of the packing user's,
	// into the dataset; nor a FIFO or device opened to wait on (a hang, or no end).
	f, err := openBeneath(in.dir, in.cur, p)
	var changed *userfile.FolderChangedError
	switch {
	case errors.As(err, &changed):
		return record{}, fmt.Errorf("cannot read %s: its folder %s changed after it was listed (it is no longer a folder: a symlink or another file); pack the folder again once it stops changing",
			p, filepath.Join(in.root, filepath.FromSlash(changed.Dir)))
	case errors.Is(err, unix.ELOOP):
		return record{}, fmt.Errorf("cannot read %s: it became a symlink after it was listed; pack the folder again once it stops changing", p)
	case err != nil:
		return record{}, fmt.Errorf("cannot read %s: %w", p, unwrap(err))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return record{}, fmt.Errorf("cannot read %s: %w", p, unwrap(err))
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return record{}, fmt.Errorf("cannot read %s: it is no longer a regular file (%s) since it was listed; pack the folder again once it stops changing", p, st.Mode().Type())
	}
	if st.Size() > readBuffer {
		in.open = f
		return record{sec: io.NewSectionReader(f, 0, st.Size())}, nil
	}
	defer f.Close()
	in.buf = in.buf[:0]
	b := bytesBuffer{in.buf}
	if _, err := io.Copy(&b, io.LimitReader(f, st.Size())); err != nil {
		return record{}, fmt.Errorf("cannot read %s: %w", p, unwrap(err))
	}
	in.buf = b.b
	return record{b: in.buf}, nil
}

func (in *filesInput) name() string { return in.cur }
func (in *filesInput) describe(uint64) string {
	return filepath.Join(in.root, filepath.FromSlash(in.cur))
}
func (in *filesInput) size() int64 { return in.n }

// closeRecord closes the file of the last record, if it is open.
func (in *filesInput) closeRecord() error {
	if in.open == nil {
		return nil
	}
	err := in.open.Close()
	in.open = nil
	return err
}

// close closes the file of the last record and the folder.
func (in *filesInput) close() error {
	err := in.closeRecord()
	if in.dir != nil {
		if e := in.dir.Close(); err == nil {
			err = e
		}
		in.dir = nil
	}
	return err
}

// bytesBuffer is an io.Writer appending to a reusable slice.
type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// openRegular opens a regular file for reading front to back: a non-empty one, unless empty
// says an empty one may be (one of several inputs, which adds no records).
func openRegular(src string, empty bool) (*os.File, os.FileInfo, error) {
	f, err := openInputFile(src) // a FIFO refused rather than waited on
	if errors.Is(err, userfile.ErrNotRegular) {
		return nil, nil, fmt.Errorf("%s is not a regular file", src)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the input: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if st.Size() == 0 && !empty {
		f.Close()
		return nil, nil, fmt.Errorf("%s is empty: nothing to pack", src)
	}
	// The input is read once, front to back: let the kernel read ahead further.
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_SEQUENTIAL)
	return f, st, nil
}

func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// countingReader counts the bytes read through it: the progress of an input read as a stream
// (a WebDataset shard, an Arrow IPC stream).
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
