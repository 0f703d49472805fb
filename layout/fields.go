package layout

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/internal/fsync"
	"github.com/blockfs/blockfs/internal/strictjson"
	"github.com/blockfs/blockfs/internal/userfile"
)

// A dataset with fields (docs/FORMAT.md, "Datasets with fields") is a directory holding
// FieldsManifestName and one dataset per field under fields/NAME: record i of each is that
// field of sample i. The fields' datasets keep the input's order (no pre-shuffle) and have the
// same records in every block, so one epoch order serves them all, and a reader of one field
// reads only that field's block files. A small fixed field (a label) is cut at blocks of its
// own instead (Field.Blocks "own"): its values for a block of samples are a few bytes, and a
// file of its own for each would make every read of them a disk read of a page.

// FieldsManifestName is the manifest of a dataset with fields.
const FieldsManifestName = "blockfs-fields.json"

// FieldsFormat is FieldsManifest.Format.
const FieldsFormat = "blockfs-fields"

// FieldsVersion is the version of the fields manifest this code writes and reads.
const FieldsVersion = 1

// FieldsManifest is blockfs-fields.json.
type FieldsManifest struct {
	Format  string  `json:"format"`
	Version int     `json:"version"`
	Records uint64  `json:"records"`
	Source  string  `json:"source,omitempty"`
	Fields  []Field `json:"fields"`
}

// Field is one field of a dataset with fields: its name, the kind and element of its values,
// and its dataset's directory, relative to the manifest's (fields/NAME).
type Field struct {
	Name       string  `json:"name"`
	Kind       Kind    `json:"kind"`
	RecordSize int64   `json:"record_size,omitempty"`
	DType      string  `json:"dtype,omitempty"`
	Shape      []int64 `json:"shape,omitempty"`
	Dir        string  `json:"dir"`
	// Blocks is "own" for a fixed field cut at blocks of its own (record i is still sample i);
	// empty: cut at the samples every other such field is cut at.
	Blocks string `json:"blocks,omitempty"`
}

// OwnBlocks is Field.Blocks of a field cut at blocks of its own.
const OwnBlocks = "own"

// Own reports whether the field is cut at blocks of its own.
func (f *Field) Own() bool { return f.Blocks == OwnBlocks }

// ownBelow: a fixed field whose values in the first block of samples take fewer bytes is cut
// at blocks of its own (when some field is not).
const ownBelow = 64 << 10

// FieldDir returns the directory of field name's dataset, relative to the dataset's.
func FieldDir(name string) string { return filepath.ToSlash(filepath.Join("fields", name)) }

// IsFields reports whether dir holds a dataset with fields.
func IsFields(dir string) bool {
	st, err := os.Lstat(filepath.Join(dir, FieldsManifestName))
	return err == nil && st.Mode().IsRegular()
}

// maxFieldsManifest bounds blockfs-fields.json.
const maxFieldsManifest = 4 << 20

// ReadFieldsManifest reads and checks dir's blockfs-fields.json.
func ReadFieldsManifest(dir string) (*FieldsManifest, error) {
	path := filepath.Join(dir, FieldsManifestName)
	raw, err := userfile.ReadFile(path, maxFieldsManifest)
	if err != nil {
		return nil, err
	}
	return ParseFieldsManifest(path, raw)
}

// FieldCache is the least a mount's cache takes for each field of a dataset: the cache's
// least pages (cache.MinPages of cache.DefaultPageSize; mount's TestFieldCache keeps them
// equal). Pack refuses a dataset of fields that no mount could serve.
const FieldCache = 4 << 20

// MaxFieldsManifest bounds blockfs-fields.json.
const MaxFieldsManifest = maxFieldsManifest

// ParseFieldsManifest parses and checks a fields manifest's bytes; path names it in errors.
func ParseFieldsManifest(path string, raw []byte) (*FieldsManifest, error) {
	if len(raw) >= maxFieldsManifest {
		return nil, errorf(ErrFormat, path, -1, "larger than %d bytes: not a fields manifest", maxFieldsManifest)
	}
	var m FieldsManifest
	// Strictly (as a dataset's manifest): a key twice would mean one thing to a reader of the
	// file and another to blockfs.
	if err := strictjson.Decode(raw, &m); err != nil {
		return nil, errorf(ErrFormat, path, -1, "not a fields manifest: %v", err)
	}
	if m.Format != FieldsFormat || m.Version != FieldsVersion {
		return nil, errorf(ErrFormat, path, -1, "format %q version %d; this blockfs reads %s version %d", m.Format, m.Version, FieldsFormat, FieldsVersion)
	}
	if len(m.Fields) == 0 {
		return nil, errorf(ErrFormat, path, -1, "no fields")
	}
	seen := map[string]bool{}
	for _, fl := range m.Fields {
		if err := checkFieldName(fl.Name); err != nil {
			return nil, errorf(ErrFormat, path, -1, "%v", err)
		}
		if seen[fl.Name] || fl.Dir != FieldDir(fl.Name) {
			return nil, errorf(ErrFormat, path, -1, "field %q: a name must be unique and its dir %q must be %q", fl.Name, fl.Dir, FieldDir(fl.Name))
		}
		seen[fl.Name] = true
		if fl.Blocks != "" && (fl.Blocks != OwnBlocks || fl.Kind != Fixed) {
			return nil, errorf(ErrFormat, path, -1, "field %q: blocks %q (only a fixed field may have blocks \"own\")", fl.Name, fl.Blocks)
		}
	}
	if m.Anchor() < 0 {
		return nil, errorf(ErrFormat, path, -1, "every field has blocks of its own: one must be cut at the samples")
	}
	return &m, nil
}

// Anchor returns the first field cut at the samples (its blocks are every such field's, and
// the order's), or -1 when there is none.
func (m *FieldsManifest) Anchor() int {
	for i := range m.Fields {
		if !m.Fields[i].Own() {
			return i
		}
	}
	return -1
}

// FieldWriter writes a dataset with fields: one Writer per field, each cut at the same
// records, the block closed once the samples' bytes in it pass the block size: their values
// and, for a variable field, the 8-byte offset of each (as a plain dataset counts them), so a
// block of empty values is bounded too. Commit writes
// the fields' datasets, then the manifest, and renames the whole into place. Not safe for
// concurrent use.
type FieldWriter struct {
	dst, tmp string
	td       *tempDir // tmp's lock
	block    int64
	ws       []*Writer
	m        FieldsManifest
	pending  int64   // bytes of the samples in the blocks being filled
	inBlock  int     // samples in the blocks being filled (at most blockSamplesCap)
	own      []int64 // per field: bytes in its own block being filled, or -1 (cut at the samples)
	decided  bool    // the first cut has chosen the fields with blocks of their own
	done     bool
}

// blockSamplesCap is the most samples a FieldWriter puts in a block cut at the samples, whatever
// the block size: a variable field's block of more would not mount (MaxBlockRecords; a 16 GiB
// block of empty values would hold 2^31). A variable for tests.
var blockSamplesCap = MaxBlockRecords

// FieldsOptions configure a FieldWriter.
type FieldsOptions struct {
	BlockSize int64  // the target bytes of a block of all the fields together
	Source    string // what is packed (free text)
	Force     bool   // replace a dataset at dst at Commit
	// BlockDone, if set, is each field's writer's WriterOptions.BlockDone, told the field: an
	// upload streams the block's files, stored under FieldDir(field)+"/".
	BlockDone func(field, dir string, files []string) error
	// Decided: the fields' Blocks as given say which are cut at blocks of their own, from the
	// first record (a pack in parts decides as one pack would, once for all its parts);
	// otherwise the first cut decides and Blocks must be empty.
	Decided bool
	// Compress is each field's WriterOptions.Compress (each field tried on its own).
	Compress *Compression
}

// CreateFieldsWith creates a dataset of fields at dst, written as opt says (the block size,
// the source named in the manifest, whether to replace dst).
func CreateFieldsWith(dst string, fields []Field, opt FieldsOptions) (*FieldWriter, error) {
	blockSize, source, force := opt.BlockSize, opt.Source, opt.Force
	if blockSize <= 0 || blockSize > MaxBlockBytes {
		return nil, fmt.Errorf("block size %d is out of range (1 B to %d B)", blockSize, int64(MaxBlockBytes))
	}
	dst = filepath.Clean(dst)
	removeStale(dst)
	if _, err := os.Lstat(dst); err == nil && !force {
		return nil, existsError(dst)
	}
	td, err := newTempDir(dst)
	if err != nil {
		return nil, fmt.Errorf("cannot create a temporary directory next to %s: %w", dst, err)
	}
	tmp := td.path
	w := &FieldWriter{dst: dst, tmp: tmp, td: td, block: blockSize, m: FieldsManifest{Format: FieldsFormat, Version: FieldsVersion, Source: source}, decided: opt.Decided}
	if err := os.Mkdir(filepath.Join(tmp, "fields"), 0o755); err != nil {
		w.Abort()
		return nil, err
	}
	for _, f := range fields {
		f.Dir = FieldDir(f.Name)
		var done func(dir string, files []string) error
		if opt.BlockDone != nil {
			name := f.Name
			done = func(dir string, files []string) error { return opt.BlockDone(name, dir, files) }
		}
		fw, err := Create(filepath.Join(tmp, filepath.FromSlash(f.Dir)), WriterOptions{Kind: f.Kind, RecordSize: f.RecordSize,
			BlockSize: max(blockSize, f.RecordSize), DType: f.DType, Shape: f.Shape, Source: source + " (field " + f.Name + ")", ManualBlocks: true,
			BlockDone: done, nested: true, Compress: opt.Compress}, false)
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		w.ws = append(w.ws, fw)
		w.m.Fields = append(w.m.Fields, f)
		w.own = append(w.own, -1)
		if opt.Decided && f.Own() {
			w.own[len(w.own)-1] = 0
		}
	}
	return w, nil
}

// Writers returns each field's writer, in field order (what Commit made of each: its
// Manifest, its CompressResult).
func (w *FieldWriter) Writers() []*Writer { return w.ws }

// Append adds a sample: values[k] is field k's value (a fixed field's exactly its record size).
func (w *FieldWriter) Append(values [][]byte) error {
	if len(values) != len(w.ws) {
		return fmt.Errorf("sample %d has %d values for %d fields", w.m.Records, len(values), len(w.ws))
	}
	id := w.m.Records
	for k, v := range values {
		if err := w.ws[k].Append(id, v); err != nil {
			return fmt.Errorf("sample %d, field %q: %w", id, w.m.Fields[k].Name, err)
		}
		w.pending += int64(len(v)) + indexBytes(w.m.Fields[k].Kind)
		if w.own[k] >= 0 {
			w.own[k] += int64(len(v))
			if err := w.cutOwn(k); err != nil {
				return err
			}
		}
	}
	w.m.Records++
	w.inBlock++
	if w.pending >= w.block || w.inBlock >= blockSamplesCap {
		return w.cut()
	}
	return nil
}

// AppendColumns adds rows samples given a column at a time: field k's values back to back in
// cols[k] and, for a variable field, their lengths in lens[k] (nil for a fixed one). The
// dataset is the one Append of each sample would write, cut at the same samples; the values
// are copied a run of samples at a time.
func (w *FieldWriter) AppendColumns(rows int, cols [][]byte, lens [][]uint64) error {
	fixed, err := w.checkColumns(rows, cols, lens)
	if err != nil {
		return err
	}
	at := make([]int, len(w.ws)) // where the run starts in each column
	var variable []int
	for k, f := range w.m.Fields {
		if f.Kind == Variable {
			variable = append(variable, k)
		}
	}
	for a := 0; a < rows; {
		b := w.runEnd(a, rows, fixed, variable, lens)
		w.inBlock += b - a
		sample := w.pending >= w.block || w.inBlock >= blockSamplesCap
		for k, f := range w.m.Fields {
			if w.own[k] >= 0 {
				w.own[k] += int64(b-a) * f.RecordSize
			}
		}
		if err := w.appendRun(a, b, cols, lens, at); err != nil {
			return err
		}
		w.m.Records += uint64(b - a)
		for k := range w.ws {
			if err := w.cutOwn(k); err != nil {
				return err
			}
		}
		if sample {
			if err := w.cut(); err != nil {
				return err
			}
		}
		a = b
	}
	for k := range cols {
		if at[k] != len(cols[k]) {
			return fmt.Errorf("samples %d on, field %q: %d bytes past its values", w.m.Records, w.m.Fields[k].Name, len(cols[k])-at[k])
		}
	}
	return nil
}

// checkColumns checks AppendColumns' columns against the fields (a fixed field's bytes, a
// variable field's count of lengths) and returns a sample's bytes in its fixed fields and its
// variable fields' offsets.
func (w *FieldWriter) checkColumns(rows int, cols [][]byte, lens [][]uint64) (int64, error) {
	if len(cols) != len(w.ws) || len(lens) != len(w.ws) {
		return 0, fmt.Errorf("samples %d on: %d columns for %d fields", w.m.Records, len(cols), len(w.ws))
	}
	var fixed int64
	for k, f := range w.m.Fields {
		fixed += indexBytes(f.Kind)
		if f.Kind == Fixed {
			if lens[k] != nil || int64(len(cols[k])) != int64(rows)*f.RecordSize {
				return 0, fmt.Errorf("samples %d on, field %q: %d bytes for %d values of %d bytes", w.m.Records, f.Name, len(cols[k]), rows, f.RecordSize)
			}
			fixed += f.RecordSize
		} else if len(lens[k]) != rows {
			return 0, fmt.Errorf("samples %d on, field %q: %d lengths for %d values", w.m.Records, f.Name, len(lens[k]), rows)
		}
	}
	return fixed, nil
}

// runEnd returns where AppendColumns' run of samples from a ends, and adds the run's bytes to
// the pending count. The run ends after the first sample that closes a block: of the samples
// (the pending bytes reach the block size, or its samples MaxBlockRecords) or of a field with
// blocks of its own. Before a run,
// every count is below the block size. fixed is a sample's bytes beside its variable values
// (checkColumns), variable the variable fields.
func (w *FieldWriter) runEnd(a, rows int, fixed int64, variable []int, lens [][]uint64) int {
	m := min(rows-a, blockSamplesCap-w.inBlock) // a block of more samples would not mount
	for k, f := range w.m.Fields {
		if w.own[k] >= 0 {
			m = min(m, int((w.block-w.own[k]+f.RecordSize-1)/f.RecordSize))
		}
	}
	if len(variable) == 0 {
		if fixed > 0 {
			m = min(m, int((w.block-w.pending+fixed-1)/fixed))
		}
		w.pending += int64(m) * fixed
		return a + m
	}
	b := a
	for b < a+m {
		size := fixed
		for _, k := range variable {
			size += int64(lens[k][b])
		}
		w.pending += size
		b++
		if w.pending >= w.block {
			break
		}
	}
	return b
}

// appendRun appends samples a to b (not included) of the columns to the fields' writers: field
// k's values from at[k] in cols[k], and at[k] moves past them.
func (w *FieldWriter) appendRun(a, b int, cols [][]byte, lens [][]uint64, at []int) error {
	for k, fw := range w.ws {
		var l []uint64
		n := (b - a) * int(w.m.Fields[k].RecordSize)
		if w.m.Fields[k].Kind == Variable {
			l = lens[k][a:b]
			n = 0
			for _, x := range l {
				n += int(x)
			}
		}
		if at[k]+n > len(cols[k]) {
			return fmt.Errorf("samples %d on, field %q: the lengths pass the column's %d bytes", w.m.Records, w.m.Fields[k].Name, len(cols[k]))
		}
		if err := fw.AppendRun(w.m.Records, cols[k][at[k]:at[k]+n], l); err != nil {
			return fmt.Errorf("field %q: %w", w.m.Fields[k].Name, err)
		}
		at[k] += n
	}
	return nil
}

// cutOwn closes the block of field k, cut at blocks of its own, once it holds a block's bytes.
func (w *FieldWriter) cutOwn(k int) error {
	if w.own[k] < w.block {
		return nil
	}
	w.own[k] = 0
	if err := w.ws[k].Cut(); err != nil {
		return fmt.Errorf("field %q: %w", w.m.Fields[k].Name, err)
	}
	return nil
}

// indexBytes is what a value of a field of kind takes in its block beside its bytes: a
// variable value's 8-byte offset.
func indexBytes(kind Kind) int64 {
	if kind == Variable {
		return 8
	}
	return 0
}

// cut closes the block of every field cut at the samples at the same record. The first cut
// first chooses the fields cut at blocks of their own: the fixed ones whose values in this
// block take fewer than ownBelow bytes, unless that is every field.
func (w *FieldWriter) cut() error {
	w.pending, w.inBlock = 0, 0
	if !w.decided {
		w.decided = true
		for _, k := range OwnFields(w.m.Fields, w.m.Records) {
			w.m.Fields[k].Blocks = OwnBlocks
			w.own[k] = int64(uint64(w.m.Fields[k].RecordSize) * w.m.Records)
			// Already a block's worth (the other fields' values take almost nothing):
			// its first block closes here too, as it would at its next value's check.
			if err := w.cutOwn(k); err != nil {
				return err
			}
		}
	}
	for k, fw := range w.ws {
		if w.own[k] >= 0 {
			continue
		}
		if err := fw.Cut(); err != nil {
			return fmt.Errorf("field %q: %w", w.m.Fields[k].Name, err)
		}
	}
	return nil
}

// OwnFields returns the fields cut at blocks of their own when the first block of samples
// holds records samples: the fixed ones whose values in it take fewer than 64 KiB, unless
// that is every field (none then).
func OwnFields(fields []Field, records uint64) []int {
	var small []int
	for k, f := range fields {
		if f.Kind == Fixed && uint64(f.RecordSize)*records < ownBelow {
			small = append(small, k)
		}
	}
	if len(small) == len(fields) {
		return nil
	}
	return small
}

// Records returns the samples appended so far.
func (w *FieldWriter) Records() uint64 { return w.m.Records }

// Commit finishes every field's dataset, writes the manifest and renames the dataset into
// place. It returns the manifest.
func (w *FieldWriter) Commit() (*FieldsManifest, error) {
	if w.done {
		return nil, errors.New("writer is closed")
	}
	if w.m.Records == 0 {
		w.Abort()
		return nil, fmt.Errorf("the input has no samples")
	}
	for k, fw := range w.ws {
		if _, err := fw.Commit(); err != nil {
			w.Abort()
			return nil, fmt.Errorf("field %q: %w", w.m.Fields[k].Name, err)
		}
	}
	w.done = true
	// One syncfs makes every field's files durable (the fields' writers sync nothing), before
	// the manifest that vouches for them.
	err := fsync.FS(w.tmp)
	if err == nil {
		var b []byte
		if b, err = json.MarshalIndent(&w.m, "", "  "); err == nil {
			err = writeFileSync(filepath.Join(w.tmp, FieldsManifestName), append(b, '\n'))
		}
	}
	for _, d := range []string{filepath.Join(w.tmp, "fields"), w.tmp} {
		if err == nil {
			err = fsync.Dir(d)
		}
	}
	if err == nil {
		err = replaceDir(w.tmp, w.dst)
	}
	if err != nil {
		w.td.release()
		return nil, err
	}
	if err := w.td.release(); err != nil {
		return nil, err
	}
	if err := fsync.Dir(filepath.Dir(w.dst)); err != nil {
		return &w.m, err
	}
	return &w.m, nil
}

// Abort removes everything written.
func (w *FieldWriter) Abort() {
	w.done = true
	for _, fw := range w.ws {
		fw.Abort()
	}
	w.td.release()
}
