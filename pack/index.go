package pack

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/blockfs/blockfs/internal/infiles"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/fsync"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
)

// blockfs index: shards served where they are (docs/FORMAT.md, "Shards in place"). Index
// reads every shard once, as pack would (webdataset.go's rules for a WebDataset's samples;
// each TFRecord record one sample of field "record"), checking its framing (tar header
// checksums, TFRecord CRCs) and summing each field's values per block, and writes where each
// value is; the shards are not copied.

// IndexOptions are blockfs index's options.
type IndexOptions struct {
	// BlockSize is the bytes of values (all fields) after which a block ends; a block also
	// ends with its shard. 0: AutoBlockSize of the shards' size, as pack.
	BlockSize int64
	// FillMissing gives a sample that lacks a field an empty value, as pack's --fill-missing.
	FillMissing bool
	// Force replaces an index already at the destination.
	Force bool
	// Of, for a part (IndexPart), is what it is a part of, kept in its index for the merge.
	Of *layout.IndexWhole
	// Total is the bytes of all the shards, when these are a part of them (IndexPart): the
	// block size and the fields stored in the index are chosen from it, as one index would.
	Total int64
	// Filled, if set, is told once the index is written how many empty values FillMissing
	// gave each field that got any.
	Filled func(field string, n int64)
}

// IndexInPlace indexes shards for a mount that serves them in place (a mount.Indexer): Index
// of format, replacing what is at out.
func IndexInPlace(ctx context.Context, format, at string, shards []infiles.Shard, out string) (*layout.ShardsIndex, error) {
	return Index(ctx, Format(format), at, shards, out, IndexOptions{Force: true})
}

// Index indexes shards (of format WebDataset or TFRecord) found at source into the directory
// out, which appears whole or not at all.
func Index(ctx context.Context, format Format, source string, shards []infiles.Shard, out string, opt IndexOptions) (*layout.ShardsIndex, error) {
	if format != WebDataset && format != TFRecord {
		return nil, fmt.Errorf("blockfs index reads WebDataset (.tar) and TFRecord shards, not %s", format)
	}
	if st, err := os.Lstat(out); err == nil {
		if !opt.Force {
			return nil, fmt.Errorf("%s exists: pass %s to replace it, or name another directory", out, optname.Flag("force"))
		}
		if !st.IsDir() || !layout.IsShardsIndex(out) {
			return nil, fmt.Errorf("%s exists and is not an index of shards: %s replaces only an index", out, optname.Flag("force"))
		}
	}
	parent := filepath.Dir(filepath.Clean(out))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("cannot write the index: %w", unwrap(err))
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	w := &indexWriter{dir: tmp, fill: opt.FillMissing, index: map[string]int{}, buf: make([]byte, 1<<20),
		ix: &layout.ShardsIndex{Format: layout.IndexFormat, Version: layout.IndexVersion, Input: string(format), Source: source, Of: opt.Of}}
	var total int64
	for _, sh := range shards {
		total += sh.Size
		w.ix.Shards = append(w.ix.Shards, layout.IndexShard{Name: sh.Name, Size: sh.Size, MtimeNs: sh.MtimeNs, ETag: sh.ETag})
	}
	if opt.Total > 0 {
		total = opt.Total
	}
	w.ix.FillMissing = opt.FillMissing
	w.storeMax = total / storeShare
	if w.blockSize = opt.BlockSize; w.blockSize == 0 {
		w.blockSize = AutoBlockSize(total, 0)
	}
	if err := w.run(ctx, format, shards); err != nil {
		w.close()
		os.RemoveAll(tmp)
		return nil, err
	}
	names := w.ix.Fields // finish lets go of w.fields
	if err := w.finish(out, opt.Force); err != nil {
		w.close()
		os.RemoveAll(tmp)
		return nil, err
	}
	for j, name := range names {
		if w.filled[j] > 0 && opt.Filled != nil {
			opt.Filled(name, w.filled[j])
		}
	}
	return w.ix, nil
}

// run reads every shard into the index.
func (w *indexWriter) run(ctx context.Context, format Format, shards []infiles.Shard) error {
	if err := os.Mkdir(filepath.Join(w.dir, "fields"), 0o755); err != nil {
		return err
	}
	if format == TFRecord {
		if _, err := w.field(TFRecordField, ""); err != nil {
			return err
		}
	}
	for i, sh := range shards {
		if err := ctx.Err(); err != nil {
			return err
		}
		w.shard = i
		r, err := sh.Open(ctx)
		if err != nil {
			return err
		}
		ahead := newAheadReader(r, 4<<20, 4)
		br := bufio.NewReaderSize(ahead, 64<<10)
		if format == TFRecord {
			err = w.tfrecord(sh, br)
		} else {
			err = w.tar(sh, br)
		}
		ahead.Close()
		r.Close()
		if err != nil {
			return err
		}
		if err := w.endBlock(); err != nil {
			return err
		}
	}
	if w.ix.Records == 0 {
		return fmt.Errorf("the shards hold no samples: nothing to index")
	}
	return nil
}

// indexWriter writes an index: one offsets and one members file per field, and the manifest.
// missingMember is the error for a sample that lacks a field (without fill).
type missingMember struct{ error }

type indexWriter struct {
	dir    string
	fill   bool
	keys   wdsKeys // the shard's samples so far
	lacked bool    // a sample lacked a field (given an empty value)
	filled []int64 // by field: empty values given for missing members (fill)
	// pending are links (members not regular files) for fields no sample had yet, by field:
	// the first sample that has the field as a file refuses the index (maxPendingLinks).
	pending   map[string]wdsIrregular
	blockSize int64
	storeMax  int64 // a field stored in the index has at most these bytes
	ix        *layout.ShardsIndex
	fields    []*indexField
	index     map[string]int // field name -> position in fields
	shard     int            // being read
	open      bool           // a block is open
	recs      uint64         // its samples
	bytes     int64          // its values' bytes, every field's
	vals      []indexValue   // the sample being read, by field
	links     []wdsIrregular // its members that are not regular files (a link, a device)
	buf       []byte         // values are read through it
}

// indexValue is one value of a sample: where it is in its shard and its size (its bytes are
// summed into its field's block CRC32C as they are read).
type indexValue struct {
	has      bool
	at, size int64
}

// indexField is one field's files and the sums of the open block.
type indexField struct {
	name           string
	offF, memF     *os.File
	off, mem       *bufio.Writer
	bytes          uint64
	crc            uint32
	offCRC, memCRC uint32
	scratch        [8]byte
	offErr, memErr error
	// The field's values, kept in the index while they are few (stored; storeMax).
	valF   *os.File
	val    *bufio.Writer
	valErr error
	total  int64 // the field's bytes so far
}

// storeShare: a field whose values come to at most 1/storeShare of the shards' bytes is
// stored in the index (a label, a caption): a reader of it reads the index's few bytes, not one
// disk request a sample from between the shards' other members.
const storeShare = 32

// store returns where the field's values are copied while it is stored, nil once it is not.
func (f *indexField) store() io.Writer {
	if f.val == nil {
		return nil
	}
	return errWriter{f.val, &f.valErr}
}

// counted adds a value of n bytes; a field whose values pass max is stored no longer.
func (f *indexField) counted(n, max int64) {
	f.total += n
	if f.val != nil && f.total > max {
		f.valF.Close()
		os.Remove(f.valF.Name())
		f.valF, f.val = nil, nil
	}
}

// errWriter writes to w, keeping its first error in *err and taking every write.
type errWriter struct {
	w   io.Writer
	err *error
}

func (e errWriter) Write(p []byte) (int, error) {
	if _, err := e.w.Write(p); err != nil && *e.err == nil {
		*e.err = err
	}
	return len(p), nil
}

func (f *indexField) putOff(v uint64) {
	binary.LittleEndian.PutUint64(f.scratch[:], v)
	f.offCRC = crc32c.Update(f.offCRC, f.scratch[:])
	if _, err := f.off.Write(f.scratch[:]); err != nil && f.offErr == nil {
		f.offErr = err
	}
}

func (f *indexField) putMem(v uint64) {
	binary.LittleEndian.PutUint64(f.scratch[:], v)
	f.memCRC = crc32c.Update(f.memCRC, f.scratch[:])
	if _, err := f.mem.Write(f.scratch[:]); err != nil && f.memErr == nil {
		f.memErr = err
	}
}

// field returns the position of field name, adding it (met first in member from, "" for
// TFRecord's one field). A field met after samples without it gives them empty values with
// fill, and is refused without.
func (w *indexWriter) field(name, from string) (int, error) {
	if j, ok := w.index[name]; ok {
		return j, nil
	}
	if err := CheckFieldNames([]FieldSpec{{Name: name, Kind: VariableField}}); err != nil {
		return 0, fmt.Errorf("%s: %w", from, err)
	}
	if m, ok := w.pending[name]; ok { // a sample before had the field as a link, as pack refuses it
		return 0, m.holeError()
	}
	if w.ix.Records > 0 { // the samples before lack it
		if err := w.keys.apart(); err != nil {
			return 0, err
		}
		w.lacked = true
	}
	if len(w.fields) == MaxFields {
		return 0, fmt.Errorf("%s: more than %d fields", from, MaxFields)
	}
	if before := w.ix.Records; before > 0 && !w.fill {
		return 0, fmt.Errorf("%s brings field %q, which the %d samples before it lack: pass %s to give them an empty %s, or fix the data",
			from, name, before, optname.Flag("fill-missing"), name)
	}
	f := &indexField{name: name}
	var err error
	if f.offF, err = os.Create(filepath.Join(w.dir, filepath.FromSlash(layout.IndexOffsetsFile(name)))); err != nil {
		return 0, err
	}
	if f.memF, err = os.Create(filepath.Join(w.dir, filepath.FromSlash(layout.IndexMembersFile(name)))); err != nil {
		f.offF.Close()
		return 0, err
	}
	if f.valF, err = os.Create(filepath.Join(w.dir, filepath.FromSlash(layout.IndexValuesFile(name)))); err != nil {
		f.offF.Close()
		f.memF.Close()
		return 0, err
	}
	f.off, f.mem, f.val = bufio.NewWriterSize(f.offF, 1<<20), bufio.NewWriterSize(f.memF, 1<<20), bufio.NewWriterSize(f.valF, 1<<20)
	for b := range w.ix.Blocks { // empty values in the blocks before
		blk := &w.ix.Blocks[b]
		f.offCRC, f.memCRC = 0, 0
		f.zeros(blk.Records)
		blk.Bytes, blk.CRC32C = append(blk.Bytes, 0), append(blk.CRC32C, 0)
		blk.OffsetsCRC32C, blk.MembersCRC32C = append(blk.OffsetsCRC32C, f.offCRC), append(blk.MembersCRC32C, f.memCRC)
	}
	f.offCRC, f.memCRC = 0, 0
	if w.open {
		f.zeros(w.recs) // and in the open block
	}
	w.index[name] = len(w.fields)
	w.fields = append(w.fields, f)
	w.filled = append(w.filled, int64(w.ix.Records)) // the samples before lack it
	w.ix.Fields = append(w.ix.Fields, name)
	w.vals = append(w.vals, indexValue{})
	return len(w.fields) - 1, nil
}

// zeros writes n empty values: the block's first offset and n more, and n starts.
func (f *indexField) zeros(n uint64) {
	f.putOff(0)
	for range n {
		f.putOff(0)
		f.putMem(0)
	}
}

// endSample writes the sample read (w.vals) into the open block, opening one, and ends the
// block once its values reach the block size.
func (w *indexWriter) endSample(key, shard string) error {
	if !w.open {
		for _, f := range w.fields {
			f.offCRC, f.memCRC = 0, 0
			f.putOff(0)
		}
		w.open = true
	}
	for _, m := range w.links {
		if j, ok := w.index[m.field]; ok && m.key == key && m.shard == shard && !w.vals[j].has {
			return m.holeError()
		}
	}
	for _, m := range w.links {
		// A link for a field no sample has had yet: the sample that brings it refuses it.
		if _, ok := w.index[m.field]; !ok && m.key == key && m.shard == shard && len(w.pending) < maxPendingLinks {
			if _, seen := w.pending[m.field]; !seen {
				if w.pending == nil {
					w.pending = map[string]wdsIrregular{}
				}
				w.pending[m.field] = m
			}
		}
	}
	// A link of the next sample may come before this one ends: kept until that one ends.
	w.links = slices.DeleteFunc(w.links, func(m wdsIrregular) bool { return m.key == key || m.shard != shard })
	for j, f := range w.fields {
		v := w.vals[j]
		if !v.has && !w.fill {
			return missingMember{fmt.Errorf("%s: sample %q has no %q member: pass %s to give it an empty %s, or fix the data", shard, key, f.name, optname.Flag("fill-missing"), f.name)}
		}
		if !v.has {
			if err := w.keys.apart(); err != nil {
				return err // a key came back: not a field to fill
			}
			v = indexValue{}
			w.filled[j]++
			w.lacked = true
		}
		f.bytes += uint64(v.size)
		f.counted(v.size, w.storeMax)
		f.putOff(f.bytes)
		f.putMem(uint64(v.at))
		w.bytes += v.size
		w.vals[j] = indexValue{}
	}
	w.recs++
	w.ix.Records++
	if w.bytes >= w.blockSize || w.recs >= layout.MaxIndexBlockRecords {
		return w.endBlock()
	}
	return nil
}

// endBlock ends the open block, if any.
func (w *indexWriter) endBlock() error {
	if !w.open {
		return nil
	}
	if len(w.ix.Blocks) == layout.MaxBlocks {
		return fmt.Errorf("the shards make more than %d blocks; blockfs keeps about 40 bytes of state for each block and allows at most %d: raise %s",
			layout.MaxBlocks, layout.MaxBlocks, optname.Flag("block-size"))
	}
	blk := layout.IndexBlock{Shard: w.shard, Records: w.recs}
	for _, f := range w.fields {
		blk.Bytes = append(blk.Bytes, f.bytes)
		blk.CRC32C = append(blk.CRC32C, f.crc)
		blk.OffsetsCRC32C = append(blk.OffsetsCRC32C, f.offCRC)
		blk.MembersCRC32C = append(blk.MembersCRC32C, f.memCRC)
		f.bytes, f.crc, f.offCRC, f.memCRC = 0, 0, 0, 0
	}
	w.ix.Blocks = append(w.ix.Blocks, blk)
	w.open, w.recs, w.bytes = false, 0, 0
	return nil
}

// finish writes the fields' files and the manifest, makes them durable and moves the index
// into place at out.
func (w *indexWriter) finish(out string, force bool) error {
	for _, f := range w.fields {
		errs := []error{f.offErr, f.memErr, f.off.Flush(), f.mem.Flush(), f.offF.Close(), f.memF.Close()}
		if f.val != nil {
			errs = append(errs, f.valErr, f.val.Flush(), f.valF.Close())
			w.ix.Stored = append(w.ix.Stored, f.name)
		}
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("writing the index: %w", unwrap(err))
			}
		}
	}
	w.fields = nil
	if err := w.ix.Validate(out); err != nil {
		return err // a bug: the index it wrote is not one it reads
	}
	raw, err := json.MarshalIndent(w.ix, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(w.dir, layout.IndexName), append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the index: %w", unwrap(err))
	}
	if err := fsync.FS(w.dir); err != nil {
		return err
	}
	if force {
		if err := os.RemoveAll(out); err != nil {
			return fmt.Errorf("replacing %s: %w", out, unwrap(err))
		}
	}
	if err := os.Rename(w.dir, out); err != nil {
		return fmt.Errorf("moving the index into place: %w", unwrap(err))
	}
	return fsync.Dir(filepath.Dir(filepath.Clean(out)))
}

// close closes the fields' files after a failure.
func (w *indexWriter) close() {
	for _, f := range w.fields {
		f.offF.Close()
		f.memF.Close()
		if f.valF != nil {
			f.valF.Close()
		}
	}
}
