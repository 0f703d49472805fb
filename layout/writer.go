package layout

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultBlockSize is the block size pack uses unless told otherwise; docs/FORMAT.md explains
// the measurement behind it.
const DefaultBlockSize = 16 << 20

// castagnoli is the CRC32C table used for every checksum in the format.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC32C (Castagnoli) checksum of data.
func CRC32C(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// WriterOptions describe the dataset a Writer creates.
type WriterOptions struct {
	Kind       Kind    // Fixed or Variable; required
	RecordSize int64   // for Fixed: bytes per record, > 0
	BlockSize  int64   // target bytes per block file; default DefaultBlockSize
	DType      string  // optional numpy dtype string, e.g. "<f4"
	Shape      []int64 // optional per-record shape
	// IDs stores a source id for every record (needed when storage order differs from source
	// order, as after a pre-shuffle). Without it, ids passed to Append must count up from 0.
	IDs        bool
	PreShuffle PreShuffle // recorded in the manifest
	Source     string     // free text recorded in the manifest (e.g. the input's name)
}

// Writer creates a dataset in a temporary directory next to its destination; Commit writes
// the manifest last and renames the directory into place, so a dataset at the destination is
// always complete. Not safe for concurrent use.
type Writer struct {
	dst, tmp string
	opt      WriterOptions
	m        Manifest
	perBlock uint64 // fixed: records per full block

	// The block being filled.
	data    []byte
	ids     []uint64
	offsets []uint64
	nextID  uint64
	done    bool
}

// Create starts a dataset at dst. dst must not exist unless force is set, in which case it is
// replaced at Commit (never before).
func Create(dst string, opt WriterOptions, force bool) (*Writer, error) {
	if opt.BlockSize == 0 {
		opt.BlockSize = DefaultBlockSize
	}
	if opt.BlockSize < 0 || opt.BlockSize > MaxBlockBytes {
		return nil, fmt.Errorf("block size %d is out of range (1 B to %d B)", opt.BlockSize, int64(MaxBlockBytes))
	}
	w := &Writer{dst: filepath.Clean(dst), opt: opt}
	w.m = Manifest{Format: FormatName, Version: Version, Kind: opt.Kind, RecordSize: opt.RecordSize,
		DType: opt.DType, Shape: opt.Shape, IDs: opt.IDs, PreShuffle: opt.PreShuffle, Source: opt.Source}
	switch opt.Kind {
	case Fixed:
		if opt.RecordSize <= 0 || opt.RecordSize > MaxRecordSize {
			return nil, fmt.Errorf("record size %d is out of range (1 B to %d B)", opt.RecordSize, MaxRecordSize)
		}
		if opt.RecordSize > opt.BlockSize {
			return nil, fmt.Errorf("record size %d is larger than the block size %d; choose a larger --block-size", opt.RecordSize, opt.BlockSize)
		}
		w.perBlock = uint64(opt.BlockSize / opt.RecordSize)
	case Variable:
		if opt.RecordSize != 0 {
			return nil, fmt.Errorf("variable-length records take no record size")
		}
		w.offsets = []uint64{0}
	default:
		return nil, fmt.Errorf("unknown record kind %q", opt.Kind)
	}
	if err := w.m.validateElement(dst); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(w.dst); err == nil && !force {
		return nil, errorf(ErrExists, w.dst, -1, "already exists (use --force to replace it)")
	}
	parent := filepath.Dir(w.dst)
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(w.dst)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("cannot create a temporary directory next to %s: %w", w.dst, err)
	}
	w.tmp = tmp
	if err := os.Mkdir(filepath.Join(tmp, "blocks"), 0o755); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// TempDir returns the directory being written; callers may keep scratch files there, under
// names that do not start with "blocks/" or equal ManifestName. They are removed with it.
func (w *Writer) TempDir() string { return w.tmp }

// RecordsPerBlock returns how many fixed-size records fill a block (0 for variable-length).
func (w *Writer) RecordsPerBlock() uint64 { return w.perBlock }

// Append adds one record with its source id. A block is closed when the next record would not
// fit: for fixed records after RecordsPerBlock records; for variable records when its data
// plus its 8-byte index entries would pass the block size (a record larger than the block
// size gets a block of its own).
func (w *Writer) Append(id uint64, rec []byte) error {
	if w.done {
		return errors.New("writer is closed")
	}
	if !w.opt.IDs && id != w.nextID {
		return fmt.Errorf("record id %d out of sequence (want %d); enable IDs to store arbitrary ids", id, w.nextID)
	}
	w.nextID++
	if w.opt.Kind == Fixed {
		if int64(len(rec)) != w.opt.RecordSize {
			return fmt.Errorf("record %d is %d bytes, want %d", id, len(rec), w.opt.RecordSize)
		}
		w.data = append(w.data, rec...)
		w.ids = append(w.ids, id)
		if uint64(len(w.ids)) == w.perBlock {
			return w.flush()
		}
		return nil
	}
	n := len(w.ids)
	if n > 0 && int64(len(w.data)+len(rec))+8*int64(n+2) > w.opt.BlockSize {
		if err := w.flush(); err != nil {
			return err
		}
	}
	w.data = append(w.data, rec...)
	w.ids = append(w.ids, id)
	w.offsets = append(w.offsets, uint64(len(w.data)))
	return nil
}

// WriteBlock writes a whole fixed-size block at once (data is the records concatenated; ids
// their source ids, one per record). Any partly filled block from Append is closed first. The
// block may hold fewer records than RecordsPerBlock, never more.
func (w *Writer) WriteBlock(data []byte, ids []uint64) error {
	if w.opt.Kind != Fixed {
		return errors.New("WriteBlock is for fixed-size records")
	}
	if int64(len(data)) != int64(len(ids))*w.opt.RecordSize || uint64(len(ids)) > w.perBlock || len(ids) == 0 {
		return fmt.Errorf("block of %d bytes and %d ids does not fit records of %d bytes, at most %d per block", len(data), len(ids), w.opt.RecordSize, w.perBlock)
	}
	if err := w.flush(); err != nil {
		return err
	}
	if !w.opt.IDs {
		for _, id := range ids {
			if id != w.nextID {
				return fmt.Errorf("record id %d out of sequence (want %d)", id, w.nextID)
			}
			w.nextID++
		}
	}
	w.data, w.ids = data, ids
	err := w.flush()
	w.data, w.ids = nil, nil
	return err
}

// flush writes the block being filled, if any, and appends its entry to the manifest.
func (w *Writer) flush() error {
	if len(w.ids) == 0 {
		return nil
	}
	i := len(w.m.Blocks)
	e := BlockEntry{
		File:    fmt.Sprintf("blocks/%06d.bin", i),
		Records: uint64(len(w.ids)),
		Bytes:   uint64(len(w.data)),
		CRC32C:  CRC32C(w.data),
	}
	if err := writeFileSync(filepath.Join(w.tmp, e.File), w.data); err != nil {
		return err
	}
	if w.opt.IDs {
		e.IDsFile = fmt.Sprintf("blocks/%06d.ids", i)
		buf := u64bytes(w.ids)
		e.IDsCRC32C = CRC32C(buf)
		if err := writeFileSync(filepath.Join(w.tmp, e.IDsFile), buf); err != nil {
			return err
		}
	}
	if w.opt.Kind == Variable {
		e.OffsetsFile = fmt.Sprintf("blocks/%06d.off", i)
		buf := u64bytes(w.offsets)
		e.OffsetsCRC32C = CRC32C(buf)
		if err := writeFileSync(filepath.Join(w.tmp, e.OffsetsFile), buf); err != nil {
			return err
		}
		w.offsets = w.offsets[:1]
	}
	w.m.Blocks = append(w.m.Blocks, e)
	w.m.Records += e.Records
	w.m.Bytes += e.Bytes
	w.data, w.ids = w.data[:0], w.ids[:0]
	return nil
}

// Commit closes the last block, writes and syncs the manifest, and renames the temporary
// directory to the destination (replacing it only if Create was given force).
func (w *Writer) Commit() (*Manifest, error) {
	if w.done {
		return nil, errors.New("writer is closed")
	}
	if err := w.flush(); err != nil {
		w.Abort()
		return nil, err
	}
	w.done = true
	if err := w.m.Validate(w.dst); err != nil {
		w.Abort()
		if w.m.Records == 0 {
			return nil, errors.New("the input has no records: nothing to pack")
		}
		return nil, err
	}
	if err := writeFileSync(filepath.Join(w.tmp, ManifestName), ManifestJSON(&w.m)); err != nil {
		w.Abort()
		return nil, err
	}
	for _, d := range []string{filepath.Join(w.tmp, "blocks"), w.tmp} {
		if err := syncDir(d); err != nil {
			w.Abort()
			return nil, err
		}
	}
	if err := w.replace(); err != nil {
		w.Abort()
		return nil, err
	}
	return &w.m, syncDir(filepath.Dir(w.dst))
}

// replace moves the finished directory to dst. An existing dst is first renamed aside and
// removed only once the new dataset is in place.
func (w *Writer) replace() error {
	old := ""
	if _, err := os.Lstat(w.dst); err == nil {
		old = w.tmp + ".old"
		if err := os.Rename(w.dst, old); err != nil {
			return fmt.Errorf("cannot move the existing %s aside: %w", w.dst, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(w.tmp, w.dst); err != nil {
		if old != "" {
			_ = os.Rename(old, w.dst)
		}
		return err
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

// Abort removes everything written so far. Safe to call more than once and after Commit.
func (w *Writer) Abort() {
	w.done = true
	if w.tmp != "" {
		_ = os.RemoveAll(w.tmp)
	}
}

func u64bytes(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// ManifestJSON returns the manifest as the writer would store it (for tests and tools).
func ManifestJSON(m *Manifest) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	_ = enc.Encode(m)
	return buf.Bytes()
}
