package pack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

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
// beyond one per bucket exist.
type bucketWriter struct {
	name    func(int) string
	limit   int
	jobs    chan bucketJob
	free    chan []byte
	done    chan struct{}
	err     error // first write error; read after done or via failed
	fail    chan struct{}
	once    sync.Once
	stopped bool
}

type bucketJob struct {
	b   int
	buf []byte
}

func newBucketWriter(name func(int) string, limit int) *bucketWriter {
	w := &bucketWriter{name: name, limit: limit, jobs: make(chan bucketJob, 4), free: make(chan []byte, 4),
		done: make(chan struct{}), fail: make(chan struct{})}
	go w.run()
	return w
}

func (w *bucketWriter) run() {
	defer close(w.done)
	for j := range w.jobs {
		if w.err == nil {
			f, err := os.OpenFile(w.name(j.b), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err == nil {
				_, err = f.Write(j.buf)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				w.err = err
				close(w.fail)
			}
		}
		select {
		case w.free <- j.buf[:0]:
		default:
		}
	}
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

// write queues buf for bucket b; the caller must not touch buf again.
func (w *bucketWriter) write(b int, buf []byte) error {
	select {
	case w.jobs <- bucketJob{b, buf}:
		return nil
	case <-w.fail:
		return w.stop()
	}
}

// stop waits for queued writes and returns the first error. Safe to call more than once.
func (w *bucketWriter) stop() error {
	w.once.Do(func() { close(w.jobs) })
	<-w.done
	return w.err
}
