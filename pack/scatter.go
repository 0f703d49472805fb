package pack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/background"
	"github.com/blockfs/blockfs/shuffle"
)

// shuffled writes the records in a uniformly random order with bounded memory, in two passes.
//
// Pass 1 reads the input once and appends each record, with its source id and length, to one
// of G bucket files chosen uniformly at random (G = input size / BucketBytes). Pass 2 loads one
// bucket at a time, permutes its records uniformly (Fisher-Yates) and appends them to the
// writer, bucket after bucket. Records are exchangeable under this procedure (assignment is
// i.i.d. and each bucket is uniformly permuted), so every order of the records is equally
// likely: blocks cut from it are uniform samples of the input. Memory: the pass-1 buffers
// (ScatterMemory) and one bucket (about BucketBytes) at a time. A record larger than the read
// buffer is never held in memory: pass 1 copies it from the input to the bucket's spill file
// (its bucket entry says where), and pass 2 streams it from there to the writer.
func (p *packer) shuffled() error {
	size := p.in.size()
	target := p.opt.BucketBytes
	if target <= 0 {
		target = 64 << 20
	}
	g := int(min(max(1, (size+target-1)/target), 4096))
	mem := p.opt.ScatterMemory
	if mem <= 0 {
		mem = 256 << 20
	}
	// One buffer per bucket, plus up to 4 queued, 1 being written and 4 free.
	limit := max(int(mem)/(g+9), 64<<10)
	dir := filepath.Join(p.w.TempDir(), "scatter")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	name := func(b int) string { return filepath.Join(dir, fmt.Sprintf("%05d", b)) }
	bw := newBucketWriter(name, limit)
	defer bw.stop()
	spillName := func(b int) string { return name(b) + ".spill" }
	total := 2 * size
	if err := p.scatter(g, bw, newSpiller(spillName, g), total); err != nil {
		return err
	}

	// Pass 2: permute each bucket and append it.
	for b := 0; b < g; b++ {
		if err := p.appendBucket(b, name(b), spillName(b), total); err != nil {
			return err
		}
	}
	return nil
}

// scatter is pass 1 of shuffled: it reads the input and appends each record's bucket entry
// to one of g buckets drawn at random, through bw (records larger than the read buffer go to
// the bucket's spill file), and waits for the writes. total is the progress bar's length.
func (p *packer) scatter(g int, bw *bucketWriter, spills *spiller, total int64) error {
	bufs := make([][]byte, g)
	rng := shuffle.NewRNG(shuffle.Derive(p.opt.Seed, shuffle.DomainPackAssign, 0, 0))
	for id := uint64(0); ; id++ {
		rec, err := p.in.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := p.take(id, rec); err != nil {
			return err
		}
		b := int(rng.Below(uint64(g)))
		if bufs[b] == nil {
			bufs[b] = bw.buffer()
		}
		bufs[b] = binary.LittleEndian.AppendUint64(bufs[b], id)
		if rec.sec != nil {
			off, err := spills.copy(b, rec.sec)
			if err != nil {
				return fmt.Errorf("%s: %w", p.in.describe(id), err)
			}
			bufs[b] = binary.LittleEndian.AppendUint64(bufs[b], uint64(rec.size())|spilled)
			bufs[b] = binary.LittleEndian.AppendUint64(bufs[b], uint64(off))
		} else {
			bufs[b] = binary.LittleEndian.AppendUint64(bufs[b], uint64(len(rec.b)))
			bufs[b] = append(bufs[b], rec.b...)
		}
		if len(bufs[b]) >= bw.limit {
			if err := bw.write(b, bufs[b]); err != nil {
				return err
			}
			bufs[b] = nil
		}
		if err := p.progress(rec.size(), total); err != nil {
			return err
		}
	}
	for b := range bufs {
		if len(bufs[b]) > 0 {
			if err := bw.write(b, bufs[b]); err != nil {
				return err
			}
		}
		bufs[b] = nil
	}
	return bw.stop()
}

// spilled marks the length of a record kept in its bucket's spill file. A bucket file holds
// one entry per record: its source id and its length (8 bytes each, little endian), then the
// record; for a record spilled because it is larger than the read buffer, the length has the
// spilled bit set and is followed by the record's offset in the spill file (8 bytes).
const spilled = 1 << 63

// appendBucket maps one bucket file, appends its records to the writer in a uniformly random
// order (spilled ones streamed from spillPath), and removes both files.
func (p *packer) appendBucket(b int, path, spillPath string, total int64) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // no record drew this bucket
	}
	if err != nil {
		return err
	}
	defer os.Remove(path)
	raw, err := mapFile(f)
	f.Close()
	if err != nil {
		return err
	}
	defer unix.Munmap(raw)
	var starts []int // offset of each entry in raw
	for off := 0; off < len(raw); {
		_, next := bucketEntry(raw, off)
		if next < 0 {
			return fmt.Errorf("bucket %d is damaged", b)
		}
		starts = append(starts, off)
		off = next
	}
	spill, err := os.Open(spillPath)
	if err == nil {
		defer os.Remove(spillPath)
		defer spill.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	perm := shuffle.Permutation(len(starts), shuffle.NewRNG(shuffle.Derive(p.opt.Seed, shuffle.DomainPackInBlock, 0, uint64(b))))
	for _, j := range perm {
		e, _ := bucketEntry(raw, starts[j])
		switch {
		case e.data >= 0:
			err = p.w.Append(e.id, raw[e.data:e.data+int(e.n)])
		case spill == nil:
			err = fmt.Errorf("bucket %d is damaged: its spill file is missing", b)
		default:
			err = p.w.AppendFrom(e.id, io.NewSectionReader(spill, e.spillAt, e.n), e.n)
		}
		if err != nil {
			return err
		}
		if err := p.progress(e.n, total); err != nil {
			return err
		}
	}
	return nil
}

// entry is a bucket file's entry for one record.
type entry struct {
	id      uint64
	n       int64 // the record's length
	data    int   // where the record starts in the bucket file; -1 if it is spilled
	spillAt int64 // where a spilled record starts in the spill file
}

// bucketEntry decodes the entry at off in a bucket file and returns it with the offset of the
// next one, or -1 if the entry is cut short.
func bucketEntry(raw []byte, off int) (entry, int) {
	if len(raw)-off < 16 {
		return entry{}, -1
	}
	e := entry{id: binary.LittleEndian.Uint64(raw[off:]), data: off + 16}
	hdr := binary.LittleEndian.Uint64(raw[off+8:])
	e.n = int64(hdr &^ spilled)
	if hdr&spilled != 0 {
		if len(raw)-off < 24 {
			return entry{}, -1
		}
		e.data, e.spillAt = -1, int64(binary.LittleEndian.Uint64(raw[off+16:]))
		return e, off + 24
	}
	if e.n > int64(len(raw)-e.data) {
		return entry{}, -1
	}
	return e, e.data + int(e.n)
}

// spiller appends records too large for memory to one spill file per bucket, from the input
// straight to the file a buffer at a time. Pass 1 only; the files are read back in pass 2.
type spiller struct {
	name  func(int) string
	sizes []int64 // bytes in each bucket's spill file
	buf   []byte
}

func newSpiller(name func(int) string, buckets int) *spiller {
	return &spiller{name: name, sizes: make([]int64, buckets)}
}

// copy appends rec to bucket b's spill file and returns its offset there.
func (s *spiller) copy(b int, rec *io.SectionReader) (int64, error) {
	if s.buf == nil {
		s.buf = make([]byte, 1<<20)
	}
	f, err := os.OpenFile(s.name(b), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return 0, err
	}
	// Hide f's ReadFrom, which would copy through a small buffer of its own.
	n, err := io.CopyBuffer(struct{ io.Writer }{f}, rec, s.buf)
	if err == nil && n != rec.Size() {
		err = fmt.Errorf("it ended after %d of its %d bytes (did the input change?)", n, rec.Size())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	off := s.sizes[b]
	s.sizes[b] += n
	return off, nil
}

// mapFile maps f read-only (a zero-length file maps to an empty slice that Munmap accepts).
func mapFile(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return nil, nil
	}
	return unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
}

// bucketWriter appends full bucket buffers to their files in the background, so reading the
// input overlaps writing the buckets. Buffers come back through a free list: at most a few
// beyond one per bucket exist. Errors follow layout.Writer's rule (background.Worker): the first
// one is kept, write refuses to queue more with it, and stop returns it. Only append works in
// the background; the other methods are for the one goroutine that fills the buckets.
type bucketWriter struct {
	name  func(int) string
	limit int
	bg    background.Worker[bucketJob]
	free  chan []byte
}

type bucketJob struct {
	b   int
	buf []byte
}

func newBucketWriter(name func(int) string, limit int) *bucketWriter {
	w := &bucketWriter{name: name, limit: limit, free: make(chan []byte, 4)}
	w.bg.Start(4, w.append)
	return w
}

// append appends one queued buffer to its bucket's file. After the first error it appends
// nothing more but still recycles the buffers.
func (w *bucketWriter) append(j bucketJob) {
	if w.bg.Err() == nil {
		if err := appendFile(w.name(j.b), j.buf); err != nil {
			w.bg.Set(err)
		}
	}
	select {
	case w.free <- j.buf[:0]:
	default:
	}
}

// appendFile appends data to path, creating it if needed.
func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// buffer returns an empty buffer for a bucket.
func (w *bucketWriter) buffer() []byte {
	select {
	case b := <-w.free:
		return b
	default:
		return make([]byte, 0, w.limit+64<<10)
	}
}

// write queues buf for bucket b; the caller must not touch buf again. Once a write has
// failed it queues nothing and returns the first error. Not to be called after stop.
func (w *bucketWriter) write(b int, buf []byte) error {
	if err := w.bg.Err(); err != nil {
		return err
	}
	w.bg.Put(bucketJob{b, buf}) // waits while four are queued
	return nil
}

// stop waits for queued writes and returns the first error. Safe to call more than once.
func (w *bucketWriter) stop() error { return w.bg.Stop() }
