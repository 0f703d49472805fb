package layout

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/background"
	"github.com/blockfs/blockfs/internal/crc32c"
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
	if opt.Names {
		if w.names, err = os.OpenFile(filepath.Join(tmp, namesName), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return w, nil
}

// namesName is the file the writer keeps record names in.
const namesName = "names.txt"

// AddName records the source name of the next source id (names are given in source order,
// independently of Append's order). A name may not contain a newline.
func (w *Writer) AddName(name string) error {
	if w.names == nil {
		return errors.New("writer does not keep names")
	}
	if strings.ContainsAny(name, "\n\x00") {
		return fmt.Errorf("name %q contains a newline or NUL, which the names file cannot hold", name)
	}
	w.namesBuf = append(append(w.namesBuf, name...), '\n')
	w.namesCount++
	if len(w.namesBuf) >= 1<<20 {
		return w.flushNames()
	}
	return nil
}

func (w *Writer) flushNames() error {
	w.namesCRC = crc32c.Update(w.namesCRC, w.namesBuf)
	w.namesBytes += uint64(len(w.namesBuf))
	_, err := w.names.Write(w.namesBuf)
	w.namesBuf = w.namesBuf[:0]
	return err
}

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
	if w.opt.Kind == Fixed {
		return w.perBlock == 1
	}
	return n+8*3 > w.opt.BlockSize
}

// makeRoom closes the block being filled if a variable record of n bytes would not fit in it.
func (w *Writer) makeRoom(n int64) error {
	k := len(w.ids)
	if w.opt.Kind == Variable && k > 0 && int64(len(w.data))+n+8*int64(k+2) > w.opt.BlockSize {
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

// flush closes the block being filled, if any: it appends its entry to the manifest and hands
// its files to the background writer, then continues in a recycled buffer. Once the background
// writer has failed, flush queues nothing and returns its first error, leaving the block as is.
func (w *Writer) flush() error {
	if len(w.ids) == 0 {
		return nil
	}
	return w.queueBlock(fileJob{data: w.data, size: int64(len(w.data)), recycle: true})
}

// queueBlock closes the block of the records in w.ids (and w.offsets), whose data file is
// written from data: w.data for flush, a reader for appendAlone. It appends the block's entry
// to the manifest and hands its files to the background writer. Once the background writer
// has failed, it queues nothing and returns its first error.
func (w *Writer) queueBlock(data fileJob) error {
	if err := w.bg.Err(); err != nil {
		return err
	}
	i := len(w.m.Blocks)
	e := BlockEntry{
		File:    fmt.Sprintf("blocks/%06d.bin", i),
		Records: uint64(len(w.ids)),
		Bytes:   uint64(data.size),
	}
	// The background writer computes the data file's CRC32C; Commit copies it into the
	// manifest after bg.Stop.
	data.path, data.block = filepath.Join(w.tmp, e.File), i
	jobs := []fileJob{data}
	if w.opt.IDs {
		e.IDsFile = fmt.Sprintf("blocks/%06d.ids", i)
		buf := u64bytes(w.ids)
		e.IDsCRC32C = CRC32C(buf)
		jobs = append(jobs, fileJob{path: filepath.Join(w.tmp, e.IDsFile), data: buf})
	}
	if w.opt.Kind == Variable {
		e.OffsetsFile = fmt.Sprintf("blocks/%06d.off", i)
		buf := u64bytes(w.offsets)
		e.OffsetsCRC32C = CRC32C(buf)
		jobs = append(jobs, fileJob{path: filepath.Join(w.tmp, e.OffsetsFile), data: buf})
		w.offsets = w.offsets[:1]
	}
	w.m.Blocks = append(w.m.Blocks, e)
	w.m.Records += e.Records
	w.m.Bytes += e.Bytes
	w.startBackground()
	w.bg.Put(jobs) // waits while one block is being written and another is queued
	if data.recycle {
		select {
		case b := <-w.free:
			w.data = b[:0]
		default:
			w.data = nil
		}
	}
	w.ids = w.ids[:0]
	return nil
}

// fileJob is one file for the background writer to create, from data or, for a block's data
// file, from src.
type fileJob struct {
	path    string
	data    []byte
	recycle bool // data is block's data buffer: checksum it, then give it back to the writer
	block   int  // for a block's data file (recycle or src): the block's number
	// A data file copied from src: size bytes, checksummed on the way; done is closed once
	// the copy is over (or skipped after an earlier error).
	src  io.Reader
	size int64
	done chan struct{}
}

// startBackground starts the goroutine that writes block files, so that reading the input and
// writing blocks overlap. At most three block buffers exist: one being filled, one queued, one
// being written.
func (w *Writer) startBackground() {
	if w.bg.Running() {
		return
	}
	w.free = make(chan []byte, 3)
	w.bg.Start(1, w.writeBlock)
}

// writeBlock writes the files of one block. After the first error it writes nothing more but
// still checksums and recycles each block buffer, so flush never waits in vain. Background
// writer only.
func (w *Writer) writeBlock(jobs []fileJob) {
	for _, j := range jobs {
		if j.src != nil {
			w.copyBlock(j)
			continue
		}
		if w.bg.Err() == nil {
			if err := writeFile(j.path, j.data); err != nil {
				w.bg.Set(err)
			}
		}
		if j.recycle {
			for len(w.dataCRC) <= j.block {
				w.dataCRC = append(w.dataCRC, 0)
			}
			w.dataCRC[j.block] = CRC32C(j.data)
			w.free <- j.data
		}
	}
	w.blockDone(jobs)
}

// blockDone calls opt.BlockDone with the files of one block, all written, unless the writer
// has failed. Background writer only.
func (w *Writer) blockDone(jobs []fileJob) {
	if w.opt.BlockDone == nil || w.bg.Err() != nil {
		return
	}
	files := make([]string, len(jobs))
	for i, j := range jobs {
		rel, err := filepath.Rel(w.tmp, j.path)
		if err != nil {
			w.bg.Set(err)
			return
		}
		files[i] = filepath.ToSlash(rel)
	}
	if err := w.opt.BlockDone(w.tmp, files); err != nil {
		w.bg.Set(err)
	}
}

// copyBlock writes a block's data file from j.src (unless the writer has failed already),
// records its checksum and closes j.done. Background writer only.
func (w *Writer) copyBlock(j fileJob) {
	defer close(j.done)
	var crc uint32
	if w.bg.Err() == nil {
		var err error
		if crc, err = writeFileFrom(j.path, j.src, j.size); err != nil {
			w.bg.Set(err)
		}
	}
	for len(w.dataCRC) <= j.block {
		w.dataCRC = append(w.dataCRC, 0)
	}
	w.dataCRC[j.block] = crc
}

// Commit closes the last block, writes and syncs the manifest, and renames the temporary
// directory to the destination (replacing it only if Create was given force). If a step fails
// before the rename, Commit removes everything the writer wrote and leaves the destination as
// it was. Two errors come after it, with the new dataset in place: failing to remove the
// replaced one (nil manifest) and failing to sync the parent directory (non-nil manifest).
// Either way the writer is finished.
func (w *Writer) Commit() (*Manifest, error) {
	if w.done {
		return nil, errors.New("writer is closed")
	}
	w.done = true
	for _, step := range []func() error{
		w.flush, // the last block, partly filled
		w.collectBlocks,
		w.validate,
		w.closeNames,
		w.syncBlocks,
		w.writeManifest,
		w.syncTempDirs,
		w.replace,
	} {
		if err := step(); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return &w.m, syncDir(filepath.Dir(w.dst))
}

// collectBlocks waits until every block file is written and copies the checksum of each data
// file, computed by the background writer, into the manifest.
func (w *Writer) collectBlocks() error {
	if err := w.bg.Stop(); err != nil {
		return err
	}
	for i := range w.m.Blocks {
		w.m.Blocks[i].CRC32C = w.dataCRC[i]
	}
	return nil
}

// validate checks the finished manifest as Open will, and says so plainly when there is no
// record at all.
func (w *Writer) validate() error {
	err := w.m.Validate(w.dst)
	if err != nil && w.m.Records == 0 {
		return errors.New("the input has no records: nothing to pack")
	}
	return err
}

// closeNames writes out and closes the names file, if the writer keeps names, and enters it in
// the manifest. It fails unless AddName was called once per record.
func (w *Writer) closeNames() error {
	if w.names == nil {
		return nil
	}
	err := w.flushNames()
	if cerr := w.names.Close(); err == nil {
		err = cerr
	}
	if err == nil && w.namesCount != w.m.Records {
		err = fmt.Errorf("%d names for %d records", w.namesCount, w.m.Records)
	}
	if err != nil {
		return err
	}
	w.m.Names = &NamesEntry{File: namesName, Bytes: w.namesBytes, CRC32C: w.namesCRC}
	return nil
}

// syncBlocks makes every file written so far durable with one syncfs, before the manifest that
// vouches for them is written.
func (w *Writer) syncBlocks() error { return syncFS(w.tmp) }

// writeManifest writes the manifest, the dataset's last file, and syncs it.
func (w *Writer) writeManifest() error {
	return writeFileSync(filepath.Join(w.tmp, ManifestName), ManifestJSON(&w.m))
}

// syncTempDirs syncs the blocks directory and the temporary directory, so their entries are
// durable before the rename publishes them.
func (w *Writer) syncTempDirs() error {
	for _, d := range []string{filepath.Join(w.tmp, "blocks"), w.tmp} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
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
	_ = w.bg.Stop()
	if w.names != nil {
		w.names.Close()
	}
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

// writeFile creates path with data, without syncing (Commit syncs the whole filesystem once).
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeFileFrom creates path with n bytes read from r, a buffer at a time, and returns their
// CRC32C. Without syncing, like writeFile.
func writeFileFrom(path string, r io.Reader, n int64) (uint32, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	h := crc32c.New()
	// Neither side offers ReadFrom or WriteTo, so CopyBuffer uses buf.
	got, err := io.CopyBuffer(io.MultiWriter(f, h), io.LimitReader(r, n), make([]byte, min(n, 1<<20)+1))
	if err == nil && got < n {
		err = fmt.Errorf("writing %s: the record ended after %d of its %d bytes: %w", path, got, n, io.ErrUnexpectedEOF)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return h.Sum32(), err
}

func writeFileSync(path string, data []byte) error {
	if err := writeFile(path, data); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// syncFS flushes everything written to the filesystem holding dir.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
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
