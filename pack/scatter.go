package pack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"

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
// (ScatterMemory) and one bucket (about BucketBytes) at a time.
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
	bufs := make([][]byte, g)
	bw := newBucketWriter(name, limit)
	defer bw.stop()

	// Pass 1: scatter.
	total := 2 * size
	rng := shuffle.NewRNG(shuffle.Derive(p.opt.Seed, shuffle.DomainPackAssign, 0, 0))
	for id := uint64(0); ; id++ {
		rec, err := p.in.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := p.addName(); err != nil {
			return err
		}
		p.records++
		b := int(rng.Below(uint64(g)))
		if bufs[b] == nil {
			bufs[b] = bw.buffer()
		}
		bufs[b] = binary.LittleEndian.AppendUint64(bufs[b], id)
		bufs[b] = binary.LittleEndian.AppendUint64(bufs[b], uint64(len(rec)))
		bufs[b] = append(bufs[b], rec...)
		if len(bufs[b]) >= limit {
			if err := bw.write(b, bufs[b]); err != nil {
				return err
			}
			bufs[b] = nil
		}
		if err := p.progress(int64(len(rec)), total); err != nil {
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
	if err := bw.stop(); err != nil {
		return err
	}

	// Pass 2: permute each bucket and append it.
	for b := 0; b < g; b++ {
		if err := p.appendBucket(b, name(b), total); err != nil {
			return err
		}
	}
	return nil
}

// appendBucket maps one bucket file, appends its records to the writer in a uniformly random
// order, and removes it.
func (p *packer) appendBucket(b int, path string, total int64) error {
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
		if len(raw)-off < 16 {
			return fmt.Errorf("bucket %d is damaged", b)
		}
		n := int(binary.LittleEndian.Uint64(raw[off+8:]))
		starts = append(starts, off)
		off += 16 + n
		if n < 0 || off > len(raw) {
			return fmt.Errorf("bucket %d is damaged", b)
		}
	}
	perm := shuffle.Permutation(len(starts), shuffle.NewRNG(shuffle.Derive(p.opt.Seed, shuffle.DomainPackInBlock, 0, uint64(b))))
	for _, j := range perm {
		off := starts[j]
		id := binary.LittleEndian.Uint64(raw[off:])
		n := int(binary.LittleEndian.Uint64(raw[off+8:]))
		if err := p.w.Append(id, raw[off+16:off+16+n]); err != nil {
			return err
		}
		if err := p.progress(int64(n), total); err != nil {
			return err
		}
	}
	return nil
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
// beyond one per bucket exist. Errors follow layout.Writer's rule: the first one is kept,
// write refuses to queue more with it, and stop returns it. Only run works in the background;
// the other methods are for the one goroutine that fills the buckets.
type bucketWriter struct {
	name    func(int) string
	limit   int
	jobs    chan bucketJob // nil after stop
	free    chan []byte
	written chan struct{} // closed when run has returned
	err     atomic.Pointer[error]
}

type bucketJob struct {
	b   int
	buf []byte
}

func newBucketWriter(name func(int) string, limit int) *bucketWriter {
	w := &bucketWriter{name: name, limit: limit, jobs: make(chan bucketJob, 4), free: make(chan []byte, 4),
		written: make(chan struct{})}
	go w.run()
	return w
}

// run appends the queued buffers until jobs is closed. After the first error it appends
// nothing more but still recycles the buffers.
func (w *bucketWriter) run() {
	defer close(w.written)
	for j := range w.jobs {
		if w.failed() == nil {
			if err := appendFile(w.name(j.b), j.buf); err != nil {
				w.fail(err)
			}
		}
		select {
		case w.free <- j.buf[:0]:
		default:
		}
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

// fail records err as the writer's error unless one is recorded already.
func (w *bucketWriter) fail(err error) { w.err.CompareAndSwap(nil, &err) }

// failed returns the first error, or nil. Safe from any goroutine.
func (w *bucketWriter) failed() error {
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
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
	if err := w.failed(); err != nil {
		return err
	}
	w.jobs <- bucketJob{b, buf} // waits while four are queued
	return nil
}

// stop waits for queued writes and returns the first error. Safe to call more than once.
func (w *bucketWriter) stop() error {
	if w.jobs != nil {
		close(w.jobs)
		<-w.written
		w.jobs = nil
	}
	return w.failed()
}
