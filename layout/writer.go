package layout

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/blockfs/blockfs/internal/background"
	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/optname"
)

// DefaultBlockSize is the block size pack uses unless told otherwise; docs/FORMAT.md explains
// the measurement behind it.
const DefaultBlockSize = 16 << 20

// CRC32C returns the CRC32C (Castagnoli) checksum of data, the checksum of every file in the
// format.
func CRC32C(data []byte) uint32 { return crc32c.Checksum(data) }

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
	// Names keeps a source name for every record (AddName, in source id order).
	Names bool
	// BlockDone, if set, is called by the writer's background goroutine once all of a block's
	// files are written, in block order, with the writer's temporary directory and the files'
	// slash-separated paths relative to it ("blocks/000003.bin", then its .ids and .off). It
	// may remove them (an upload to an object store does): the writer does not read them
	// again. An error fails the writer like a failed write. Default: nil.
	BlockDone func(dir string, files []string) error
	// ManualBlocks closes blocks only at Cut (and Commit), never by size: the fields of a
	// dataset with fields (FieldWriter) are cut at the same records. BlockSize then bounds
	// only a record's size. Default: false.
	ManualBlocks bool
	// Compress, when set, writes block data files compressed (frames.go) as it says, unless
	// a trial of the first block's first frames does not shrink them (KeepRawRatio): then
	// the dataset is written raw (CompressResult says which). Ids, offsets and names stay
	// raw. Default: nil, raw.
	Compress *Compression

	// nested: the dataset is a part of another writer's temporary directory (a field of a
	// FieldWriter): written at dst itself, which must not exist, and not synced or renamed at
	// Commit (the other writer syncs and renames the whole).
	nested bool
}

// Writer creates a dataset in a temporary directory next to its destination; Commit writes
// the manifest last and renames the directory into place, so a dataset at the destination is
// always complete. Not safe for concurrent use.
type Writer struct {
	dst, tmp string
	td       *tempDir // tmp's lock; nil when nested
	opt      WriterOptions
	m        Manifest
	perBlock uint64 // fixed: records per full block

	// The block being filled.
	data    []byte
	ids     []uint64 // with WriterOptions.IDs the records' ids; without, only its length counts
	offsets []uint64
	nextID  uint64
	done    bool

	names      *os.File // names.txt being written, when opt.Names
	namesBuf   []byte
	namesCount uint64
	namesCRC   uint32
	namesBytes uint64

	// The background writer (startBackground). Its first error is kept (bg.Err): flush then
	// refuses to queue more and Commit returns it.
	bg   background.Worker[[]fileJob]
	free chan []byte
	// dataCRC is the CRC32C of each block's data file, by block. Only the background writer
	// touches it until bg.Stop returns.
	dataCRC []uint32
	comp    *compressor // nil without WriterOptions.Compress
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
	comp, err := newCompressor(opt.Compress)
	if err != nil {
		return nil, err
	}
	w := &Writer{dst: filepath.Clean(dst), opt: opt, comp: comp}
	w.m = Manifest{Format: FormatName, Version: Version, Kind: opt.Kind, RecordSize: opt.RecordSize,
		DType: opt.DType, Shape: opt.Shape, IDs: opt.IDs, PreShuffle: opt.PreShuffle, Source: opt.Source}
	switch opt.Kind {
	case Fixed:
		if opt.RecordSize <= 0 || opt.RecordSize > MaxRecordSize {
			return nil, fmt.Errorf("record size %d is out of range (1 B to %d B)", opt.RecordSize, MaxRecordSize)
		}
		if opt.RecordSize > opt.BlockSize {
			return nil, fmt.Errorf("record size %d is larger than the block size %d; choose a larger %s", opt.RecordSize, opt.BlockSize, optname.Flag("block-size"))
		}
		w.perBlock = uint64(opt.BlockSize / opt.RecordSize)
		if opt.ManualBlocks {
			w.perBlock = math.MaxUint64
		}
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
	if !opt.nested {
		removeStale(w.dst)
	}
	if _, err := os.Lstat(w.dst); err == nil && !force {
		return nil, existsError(w.dst)
	}
	if opt.nested {
		// Inside another writer's temporary directory: written in place, no lock of its own.
		err = os.Mkdir(w.dst, 0o777)
		w.tmp = w.dst
	} else if w.td, err = newTempDir(w.dst); err == nil {
		w.tmp = w.td.path
	}
	if err != nil {
		return nil, fmt.Errorf("cannot create a temporary directory next to %s: %w", w.dst, err)
	}
	tmp := w.tmp
	if err := os.Mkdir(filepath.Join(tmp, "blocks"), 0o755); err != nil {
		w.Abort()
		return nil, err
	}
	if opt.Names {
		if w.names, err = os.OpenFile(filepath.Join(tmp, namesName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return w, nil
}

// Manifest returns the dataset's manifest: complete once Commit has returned it.
func (w *Writer) Manifest() *Manifest { return &w.m }

// TempDir returns the directory being written; callers may keep scratch files there, under
// names that do not start with "blocks/" or equal ManifestName. They are removed with it.
func (w *Writer) TempDir() string { return w.tmp }

// Append adds one record with its source id. A block is closed when the next record would not
// fit: for fixed records after floor(BlockSize / RecordSize) records; for variable records when its data
// plus its 8-byte index entries would pass the block size (a record larger than the block
// size gets a block of its own). A record sure to be alone in its block is written straight to
// its block file, without a copy in a block buffer (see AppendFrom). Once a block file could
// not be written, Append refuses every record with that first error.
func (w *Writer) Append(id uint64, rec []byte) error {
	n := int64(len(rec))
	if err := w.admit(id, n); err != nil {
		return err
	}
	if w.alone(n) {
		return w.appendAlone(id, bytes.NewReader(rec), n)
	}
	if err := w.makeRoom(n); err != nil {
		return err
	}
	w.data = append(w.data, rec...)
	return w.placed(id)
}

// AppendFrom adds one record of n bytes read from r, with its source id, exactly as Append
// would add those bytes. A record sure to be alone in its block (variable records of more
// than the block size less 24 bytes; fixed records when a block holds one) is copied from r
// to its block file by the background writer, a buffer at a time, so it is never held in
// memory whatever its size; AppendFrom waits for that copy, and r is not used once it
// returns. Other records are read into the block being filled. If r fails or ends early, its
// error is returned: for a record read into the block, nothing is added; for one being copied
// to its block file, the writer fails with that error, as for a failed write.
func (w *Writer) AppendFrom(id uint64, r io.Reader, n int64) error {
	if err := w.admit(id, n); err != nil {
		return err
	}
	if w.alone(n) {
		return w.appendAlone(id, r, n)
	}
	if err := w.makeRoom(n); err != nil {
		return err
	}
	have := len(w.data)
	w.grow(int(n))
	w.data = w.data[:have+int(n)]
	if _, err := io.ReadFull(r, w.data[have:]); err != nil {
		w.data = w.data[:have]
		return err
	}
	return w.placed(id)
}

// AppendRun adds records first, first+1, ... from data, back to back, to a writer with
// ManualBlocks, exactly as Append of each would: fixed-size records fill data whole; variable
// ones have the lengths lens (one per record, their sum len(data)). It takes them in one copy,
// for a batch of a column (FieldWriter.AppendColumns).
func (w *Writer) AppendRun(first uint64, data []byte, lens []uint64) error {
	if err := w.writable(); err != nil {
		return err
	}
	if !w.opt.ManualBlocks {
		return errors.New("AppendRun is for a writer with ManualBlocks")
	}
	if !w.opt.IDs && first != w.nextID {
		return fmt.Errorf("record id %d out of sequence (want %d)", first, w.nextID)
	}
	var n uint64
	if w.opt.Kind == Fixed {
		rs := uint64(w.opt.RecordSize)
		if uint64(len(data))%rs != 0 {
			return fmt.Errorf("records %d on: %d bytes are not whole %d-byte records", first, len(data), rs)
		}
		n = uint64(len(data)) / rs
	} else {
		var sum uint64
		for i, l := range lens {
			if l > uint64(w.MaxRecord()) {
				return fmt.Errorf("record %d is %d bytes, over the limit of %d bytes for one record", first+uint64(i), l, w.MaxRecord())
			}
			sum += l
		}
		if sum != uint64(len(data)) {
			return fmt.Errorf("records %d on: lengths of %d bytes for %d bytes of data", first, sum, len(data))
		}
		n = uint64(len(lens))
	}
	at := uint64(len(w.data))
	w.data = append(w.data, data...)
	if w.opt.IDs {
		for i := range n {
			w.ids = append(w.ids, first+i)
		}
	} else {
		// Without stored ids only the count of w.ids is read (the block's records).
		k := len(w.ids)
		w.ids = slices.Grow(w.ids, int(n))[:k+int(n)]
	}
	if w.opt.Kind == Variable {
		for _, l := range lens {
			at += l
			w.offsets = append(w.offsets, at)
		}
	}
	w.nextID = first + n
	return nil
}

// Cut closes the block being filled (ManualBlocks); nothing when it is empty.
func (w *Writer) Cut() error {
	if err := w.writable(); err != nil {
		return err
	}
	return w.flush()
}

// BlockBytes returns the bytes of data in the block being filled.
func (w *Writer) BlockBytes() int64 { return int64(len(w.data)) }

// MaxRecord returns the size of the largest record the writer takes: the record size for
// fixed records; for variable ones MaxBlockBytes, as such a record gets a block of its own.
func (w *Writer) MaxRecord() int64 {
	if w.opt.Kind == Fixed {
		return w.opt.RecordSize
	}
	return MaxBlockBytes
}

// admit checks that the writer takes a record of n bytes with source id id.
func (w *Writer) admit(id uint64, n int64) error {
	if err := w.writable(); err != nil {
		return err
	}
	if !w.opt.IDs && id != w.nextID {
		return fmt.Errorf("record id %d out of sequence (want %d); enable IDs to store arbitrary ids", id, w.nextID)
	}
	if w.opt.Kind == Fixed && n != w.opt.RecordSize {
		return fmt.Errorf("record %d is %d bytes, want %d", id, n, w.opt.RecordSize)
	}
	if n < 0 || n > w.MaxRecord() {
		return fmt.Errorf("record %d is %d bytes, over the limit of %d bytes for one record", id, n, w.MaxRecord())
	}
	return nil
}

// alone reports whether a record of n bytes is sure to get a block of its own under Append's
// rule: for variable records, when even an empty record after it would not fit (n plus the
// three index entries of a two-record block passes the block size), which also closes any
// block before it.
func (w *Writer) alone(n int64) bool {
	if w.opt.ManualBlocks {
		return false
	}
	if w.opt.Kind == Fixed {
		return w.perBlock == 1
	}
	return n+8*3 > w.opt.BlockSize
}

// makeRoom closes the block being filled if a variable record of n bytes would not fit in it.
func (w *Writer) makeRoom(n int64) error {
	if w.opt.ManualBlocks {
		return nil
	}
	k := len(w.ids)
	if w.opt.Kind == Variable && k > 0 && (int64(len(w.data))+n+8*int64(k+2) > w.opt.BlockSize || k >= MaxBlockRecords) {
		return w.flush()
	}
	return nil
}

// placed enters the record just added to w.data, and closes the block when a fixed block is
// full.
func (w *Writer) placed(id uint64) error {
	w.nextID++
	w.ids = append(w.ids, id)
	if w.opt.Kind == Fixed {
		if uint64(len(w.ids)) == w.perBlock {
			return w.flush()
		}
		return nil
	}
	w.offsets = append(w.offsets, uint64(len(w.data)))
	return nil
}

// appendAlone closes the block being filled and makes a block of the one record of n bytes
// in r: the background writer copies it to the block's data file, and appendAlone waits for
// it. It returns the writer's first error if that or an earlier block failed.
func (w *Writer) appendAlone(id uint64, r io.Reader, n int64) error {
	if err := w.flush(); err != nil {
		return err
	}
	w.nextID++
	w.ids = append(w.ids, id)
	if w.opt.Kind == Variable {
		w.offsets = append(w.offsets, uint64(n))
	}
	done := make(chan struct{})
	if err := w.queueBlock(fileJob{src: r, size: n, done: done}); err != nil {
		return err
	}
	<-done
	return w.bg.Err()
}

// ReadError is ReadFixed's failure to read r (as opposed to a failure to write a block, or
// of WriterOptions.BlockDone): the caller names its input.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// ReadFixed appends n fixed-size records read from r, with source ids first, first+1, ...,
// reading straight into the block buffer (one copy from the kernel, as cp does). Like Append,
// it refuses records once a block file could not be written. A failure to read r is a
// *ReadError.
func (w *Writer) ReadFixed(r io.Reader, first, n uint64) error {
	if w.opt.Kind != Fixed {
		return errors.New("ReadFixed is for fixed-size records")
	}
	if err := w.writable(); err != nil {
		return err
	}
	rs := uint64(w.opt.RecordSize)
	for n > 0 {
		if !w.opt.IDs && first != w.nextID {
			return fmt.Errorf("record id %d out of sequence (want %d)", first, w.nextID)
		}
		k := min(n, w.perBlock-uint64(len(w.ids)))
		have := len(w.data)
		need := have + int(k*rs)
		w.grow(int(k * rs))
		w.data = w.data[:need]
		if _, err := io.ReadFull(r, w.data[have:]); err != nil {
			w.data = w.data[:have]
			return &ReadError{Err: err}
		}
		for i := uint64(0); i < k; i++ {
			w.ids = append(w.ids, first+i)
		}
		first, n = first+k, n-k
		w.nextID = first
		if uint64(len(w.ids)) == w.perBlock {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// grow makes room for n more bytes in the block buffer. A fixed block's buffer is sized for
// the whole block at once.
func (w *Writer) grow(n int) {
	if w.opt.Kind == Variable {
		w.data = slices.Grow(w.data, n)
		return
	}
	if need := len(w.data) + n; cap(w.data) < need {
		grown := make([]byte, len(w.data), max(need, int(w.perBlock*uint64(w.opt.RecordSize))))
		copy(grown, w.data)
		w.data = grown
	}
}

// writable returns why the writer takes no more records: it is closed, or the background
// writer has failed (its first error). Nil if it takes them.
func (w *Writer) writable() error {
	if w.done {
		return errors.New("writer is closed")
	}
	return w.bg.Err()
}
