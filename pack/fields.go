package pack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/blockfs/blockfs/internal/infiles"

	"github.com/dustin/go-humanize"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
)

// Samples with named fields (docs/FORMAT.md, "Datasets with fields"): an input whose samples
// have several named fields (a Parquet or Arrow table's columns, a WebDataset sample's
// extensions, a TFRecord's record) is read by a SampleReader and packed by PackFields into one
// dataset per field, all with the same records per block, so that a mount serves every field in
// one order, each as a file of its own.

// FieldKind is whether every value of a field has one size.
type FieldKind string

const (
	FixedField    FieldKind = "fixed"    // every value RecordSize bytes
	VariableField FieldKind = "variable" // values of any length
)

// FieldSpec describes one field of a sample.
type FieldSpec struct {
	Name       string    // as the mount names its files: epoch-NNNN.<Name>
	Kind       FieldKind //
	RecordSize int64     // Fixed: bytes of every value
	// DType is the numpy dtype of the values' elements ("<f4", "<i8", "|u1"); "" for opaque
	// bytes. For a Fixed field, DType and Shape describe one value (RecordSize = itemsize x
	// product(Shape)); for a Variable one, DType is the element of a variable-length list
	// ("<i4" token lists; "|u1" or "" bytes and strings) and Shape is empty.
	DType string
	Shape []int64
}

// SampleReader reads the samples of an input with fields. Fields is known before the first
// sample (a table's schema; a scan of a tar's member names). Next returns the next sample's
// values in Fields' order, each a complete value (a Fixed field's exactly RecordSize bytes),
// or io.EOF after the last. A value's bytes may be reused by the next call of Next. Close
// releases the input. Errors name the input, the sample and the field, in one line that says
// what to do.
type SampleReader interface {
	Fields() []FieldSpec
	Next() ([][]byte, error)
	// Progress returns the input bytes read so far and in all (for pack's progress bar); total
	// 0 when unknown.
	Progress() (done, total int64)
	Close() error
}

// Columns is a batch of samples a column at a time: Data[k] is field k's values back to back,
// and for a variable field Lens[k] their lengths (nil for a fixed one).
type Columns struct {
	Rows int
	Data [][]byte
	Lens [][]uint64
}

// ColumnReader is a SampleReader that can also give its samples a batch at a time, each
// column in one run of bytes (a table's record batch: no work per value). NextColumns returns
// the next batch, or io.EOF after the last; its bytes may be reused by the next call. A reader
// is read with Next or with NextColumns, not both.
type ColumnReader interface {
	SampleReader
	NextColumns() (*Columns, error)
}

// CheckFieldNames refuses field names the mount cannot serve: empty, longer than 64 bytes,
// with characters other than letters, digits, '_', '-' and '.', starting with '.' or '-',
// equal to a sidecar's (ids, offsets, source) or ending in ".offsets", or repeated.
func CheckFieldNames(fields []FieldSpec) error {
	if len(fields) == 0 {
		return fmt.Errorf("the input has no fields")
	}
	seen := map[string]bool{}
	for _, f := range fields {
		switch {
		case !layout.FieldNameForm.MatchString(f.Name):
			return fmt.Errorf("field name %q cannot name a file of the mount: use letters, digits, '_', '-' and '.', at most 64, not starting with '.' or '-'", f.Name)
		case layout.IsSidecarName(f.Name):
			return fmt.Errorf("field name %q is a sidecar's (epoch-NNNN.%s): rename the field in the input (a Parquet column, a tar member's extension)", f.Name, f.Name)
		case seen[f.Name]:
			return fmt.Errorf("two fields are named %q", f.Name)
		}
		seen[f.Name] = true
		if f.Kind == FixedField && f.RecordSize <= 0 {
			return fmt.Errorf("field %q is fixed-size with %d bytes a value", f.Name, f.RecordSize)
		}
	}
	return nil
}

// MaxFields is the most fields PackFields packs. A mount serves each field from a dataset of
// its own and needs at least layout.FieldCache of its cache for each (whatever --mix and
// --readahead): 4 GiB for 1024 fields. A table of
// 10^4 columns made 160,000 files that no mount could serve (39 GiB of cache).
const MaxFields = 1024

// checkFieldCount refuses an input of more than MaxFields fields before anything is written.
func checkFieldCount(n int, format Format) error {
	if n <= MaxFields {
		return nil
	}
	how := "choose at most " + strconv.Itoa(MaxFields) + " with " + optname.Flag("columns")
	if format != Parquet && format != Arrow {
		how = "pack at most " + strconv.Itoa(MaxFields) + " fields"
	}
	return fmt.Errorf("the input has %d fields; a mount serves each as a file of its own and needs at least %s of cache for each, %s for all, whatever %s and %s: %s",
		n, humanize.IBytes(uint64(layout.FieldCache)), humanize.IBytes(uint64(layout.FieldCache)*uint64(n)), optname.Flag("mix"), optname.Flag("readahead"), how)
}

// The formats whose samples have fields, packed by PackFields.
const (
	Parquet    Format = "parquet" // Apache Parquet: a field per column (a struct's leaves dotted)
	Arrow      Format = "arrow"   // Arrow IPC files or streams (.arrow, .feather; Hugging Face's cache)
	WebDataset Format = infiles.WebDataset
	TFRecord   Format = infiles.TFRecord
)

// fieldFormats are the formats with fields, and the file extensions Detect and FieldInputs
// know them by.
var fieldFormats = map[Format][]string{
	Parquet: {".parquet", ".pq"}, Arrow: {".arrow", ".feather", ".ipc"}, WebDataset: infiles.ShardExts[infiles.WebDataset], TFRecord: infiles.ShardExts[infiles.TFRecord],
}

// HasFields reports whether f's samples have named fields (PackFields packs them).
func (f Format) HasFields() bool { _, ok := fieldFormats[f]; return ok }

// DetectFields returns the format with fields of src for --format auto: a file or a glob whose
// extension names one (.parquet, .arrow, .feather, .tar, .tfrecord); false for anything else
// (a folder is files).
func DetectFields(src string) (Format, bool) {
	if st, err := os.Stat(src); err == nil && st.IsDir() {
		return "", false
	}
	return fieldFormatOf(src)
}

// fieldFormatOf returns the format with fields that path's extension names.
func fieldFormatOf(path string) (Format, bool) {
	ext := strings.ToLower(filepath.Ext(path))
	for f, exts := range fieldFormats {
		if slices.Contains(exts, ext) {
			return f, true
		}
	}
	return "", false
}

// FieldInputs expands pack's SRC for a format with fields into the files to read, in order: a
// file; a glob ("shards/*.tar", quoted so pack sees it), sorted; or a folder's files with the
// format's extensions, sorted by path. An empty result is an error.
func FieldInputs(format Format, src string) ([]string, error) {
	return infiles.List(src, string(format), fieldFormats[format])
}

// FieldsResult says what PackFields did.
type FieldsResult struct {
	// Manifest is the dataset's fields manifest; with OneField (an input of one field, packed
	// as a plain dataset) what it would say, not written.
	Manifest  *layout.FieldsManifest
	OneField  bool
	Format    Format
	Inputs    int   // files read
	Bytes     int64 // bytes of the fields' values
	BlockSize int64
	AutoBlock bool
	Notes     []string // what the reader skipped or the user should know, one line each
	// Compressed are the fields' dataset manifests, in field order, for what --compress made
	// of each (their stored and raw bytes).
	Compressed []*layout.Manifest
}

// noter is a SampleReader that has notes for pack's summary (what it skipped).
type noter interface{ Notes() []string }

// PackFields packs the samples of r into a dataset with fields at dst: one dataset per field,
// cut at the same samples once a block's values pass the block size (opt.BlockSize, or
// AutoBlockSize of the input), in input order (the mount's automatic window shuffles them). It
// closes r.
func PackFields(ctx context.Context, r SampleReader, dst string, format Format, inputs int, opt Options) (*FieldsResult, error) {
	defer r.Close()
	specs := r.Fields()
	if err := CheckFieldNames(specs); err != nil {
		return nil, err
	}
	if err := checkFieldCount(len(specs), format); err != nil {
		return nil, err
	}
	res := &FieldsResult{Format: format, Inputs: inputs, BlockSize: opt.BlockSize}
	if res.BlockSize == 0 {
		_, total := r.Progress()
		res.BlockSize, res.AutoBlock = AutoBlockSize(max(total, 1), 0), true
	}
	fields := make([]layout.Field, len(specs))
	for i, s := range specs {
		kind := layout.Variable
		if s.Kind == FixedField {
			kind = layout.Fixed
		}
		fields[i] = layout.Field{Name: s.Name, Kind: kind, RecordSize: s.RecordSize, DType: s.DType, Shape: s.Shape}
		if opt.Fields.OwnDecided && kind == layout.Fixed && slices.Contains(opt.Fields.Own, s.Name) {
			fields[i].Blocks = layout.OwnBlocks
		}
	}
	var w sink
	if len(fields) == 1 {
		// One field keeps today's tree: a plain dataset, served as epoch-NNNN.
		f := fields[0]
		pw, err := layout.Create(dst, layout.WriterOptions{Kind: f.Kind, RecordSize: f.RecordSize, BlockSize: max(res.BlockSize, f.RecordSize),
			DType: f.DType, Shape: f.Shape, Source: string(format) + " input (field " + f.Name + ")", BlockDone: opt.BlockDone,
			Compress: opt.Compress}, opt.Force)
		if err != nil {
			return nil, err
		}
		w = &oneField{w: pw}
	} else {
		fw, err := layout.CreateFieldsWith(dst, fields, layout.FieldsOptions{BlockSize: res.BlockSize, Source: string(format) + " input",
			Force: opt.Force, BlockDone: opt.FieldBlockDone, Decided: opt.Fields.OwnDecided, Compress: opt.Compress})
		if err != nil {
			return nil, err
		}
		w = fw
	}
	var err error
	if cr, ok := r.(ColumnReader); ok {
		err = packColumns(ctx, cr, w, specs, res, opt)
	} else {
		err = packSamples(ctx, r, w, specs, res, opt)
	}
	if err != nil {
		w.Abort()
		return nil, err
	}
	if err := commitFields(w, fields, res); err != nil {
		return nil, err
	}
	if n, ok := r.(noter); ok {
		res.Notes = append(n.Notes(), res.Notes...)
	}
	if need := layout.FieldCache * int64(len(fields)); len(fields) > 1 && need >= 1<<30 {
		res.Notes = append(res.Notes, fmt.Sprintf("a mount of its %d fields needs at least %s of cache (%s each, whatever %s and %s); %s packs fewer",
			len(fields), humanize.IBytes(uint64(need)), humanize.IBytes(uint64(layout.FieldCache)), optname.Flag("mix"), optname.Flag("readahead"), optname.Flag("columns")))
	}
	return res, nil
}

// commitFields commits w, a plain dataset of one field or a dataset with fields, and enters
// in res its manifest and what --compress made of each field.
func commitFields(w sink, fields []layout.Field, res *FieldsResult) error {
	var ws []*layout.Writer
	switch w := w.(type) {
	case *oneField:
		m, err := w.w.Commit()
		if err != nil {
			return err
		}
		res.OneField = true
		res.Manifest = &layout.FieldsManifest{Format: layout.FieldsFormat, Version: layout.FieldsVersion, Records: m.Records, Fields: fields}
		ws = []*layout.Writer{w.w}
	case *layout.FieldWriter:
		var err error
		if res.Manifest, err = w.Commit(); err != nil {
			return err
		}
		ws = w.Writers()
	}
	for k, fw := range ws {
		res.Compressed = append(res.Compressed, fw.Manifest())
		if note := compressNote(fw, fields[k].Name); note != "" {
			res.Notes = append(res.Notes, note)
		}
	}
	return nil
}

// packSamples appends r's samples to w one at a time.
func packSamples(ctx context.Context, r SampleReader, w sink, specs []FieldSpec, res *FieldsResult, opt Options) error {
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if opt.Progress != nil {
				done, total := r.Progress()
				opt.Progress(done, total, w.Records())
			}
		}
		values, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		for k, v := range values {
			if specs[k].Kind == FixedField && int64(len(v)) != specs[k].RecordSize {
				return fmt.Errorf("sample %d: field %q has %d bytes; it is fixed-size, %d bytes a value", w.Records(), specs[k].Name, len(v), specs[k].RecordSize)
			}
			res.Bytes += int64(len(v))
		}
		if err := w.Append(values); err != nil {
			return err
		}
	}
}

// packColumns appends r's samples to w a batch at a time.
func packColumns(ctx context.Context, r ColumnReader, w sink, specs []FieldSpec, res *FieldsResult, opt Options) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if opt.Progress != nil {
			done, total := r.Progress()
			opt.Progress(done, total, w.Records())
		}
		c, err := r.NextColumns()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if len(c.Data) != len(specs) || len(c.Lens) != len(specs) {
			return fmt.Errorf("samples %d on: %d columns for %d fields", w.Records(), len(c.Data), len(specs))
		}
		for k := range specs {
			if specs[k].Kind == FixedField && int64(len(c.Data[k])) != int64(c.Rows)*specs[k].RecordSize {
				return fmt.Errorf("samples %d on: field %q has %d bytes for %d values; it is fixed-size, %d bytes a value", w.Records(), specs[k].Name, len(c.Data[k]), c.Rows, specs[k].RecordSize)
			}
			res.Bytes += int64(len(c.Data[k]))
		}
		if err := w.AppendColumns(c.Rows, c.Data, c.Lens); err != nil {
			return err
		}
	}
}

// sink is what PackFields appends samples to: a layout.FieldWriter, or for an input of one
// field a plain dataset's writer (oneField).
type sink interface {
	Append(values [][]byte) error
	AppendColumns(rows int, cols [][]byte, lens [][]uint64) error
	Records() uint64
	Abort()
}

// oneField is the sink of an input of one field: a plain dataset of its values.
type oneField struct {
	w *layout.Writer
	n uint64 // values appended
}

func (o *oneField) Append(values [][]byte) error {
	if err := o.w.Append(o.n, values[0]); err != nil {
		return err
	}
	o.n++
	return nil
}

func (o *oneField) AppendColumns(rows int, cols [][]byte, lens [][]uint64) error {
	if lens[0] == nil {
		if err := o.w.ReadFixed(bytes.NewReader(cols[0]), o.n, uint64(rows)); err != nil {
			return err
		}
		o.n += uint64(rows)
		return nil
	}
	var at uint64
	for _, l := range lens[0] {
		if l > uint64(len(cols[0]))-at {
			return fmt.Errorf("samples %d on: the lengths pass the column's %d bytes", o.n, len(cols[0]))
		}
		if err := o.Append([][]byte{cols[0][at : at+l]}); err != nil {
			return err
		}
		at += l
	}
	if at != uint64(len(cols[0])) {
		return fmt.Errorf("samples %d on: %d bytes past the values' lengths", o.n, uint64(len(cols[0]))-at)
	}
	return nil
}

func (o *oneField) Records() uint64 { return o.n }

func (o *oneField) Abort() { o.w.Abort() }
