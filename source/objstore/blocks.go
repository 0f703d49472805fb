package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"syscall"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/parallel"
	"github.com/blockfs/blockfs/source"
)

// Blocks implements source.Blocks over the objects a table names (keys, with the size and
// ETag seen when the dataset opened, and the manifest's CRC32C). Safe for concurrent use.
//
// Every byte of an object with a checksum passes through the checksum before Fill returns any
// of it, whatever part of the object a read wants:
//
//   - a read of a whole object (the cache loads a block file in one run: cache.Options.Whole)
//     is fetched straight into the caller's buffers in ranged GETs of PartSize, Concurrency at
//     a time across all reads, each part summed as it arrives;
//   - a read of part of an object of up to stageMax bytes fetches the whole object into a
//     small staging area (stager), checks it and copies the part out; the rest stays there for
//     the next read of the same object (a reader of 1 MiB pieces of a block);
//   - a read of part of a larger object, or with the staging area full, streams the whole
//     object through the checksum: the parts of it the read wants go into its buffers, the
//     others through a small scratch buffer, and nothing is kept.
//
// A read whose caller checks the whole file itself (source.Read.CallerChecks) reads only its
// part. A readahead's read (source.Read.Ahead) waits for a request slot after the readers'.
type Blocks struct {
	s     *Store       // immutable
	t     source.Table // immutable
	stage *stager
}

// stageBudget is the most bytes of objects Blocks stages at once, fetching or kept (two 16 MiB
// blocks); stageMax the largest object it stages.
const (
	stageBudget = 32 << 20
	stageMax    = stageBudget
)

// NewBlocks returns the objects of t in s.
func NewBlocks(s *Store, t source.Table) *Blocks {
	return &Blocks{s: s, t: t, stage: newStager(stageBudget)}
}

// Size implements source.Blocks.
func (b *Blocks) Size(id source.FileID) int64 { return source.TableSize(b.t, id) }

// Fill implements source.Blocks. Errors are *source.Error wrapping source.ErrChanged (the
// object was replaced or is shorter), source.ErrCorrupt (a bad checksum, twice),
// source.ErrUnavailable (the store did not answer within the retry budget), syscall.ENOENT
// (the object is gone) or the context's error.
func (b *Blocks) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	return source.FillTable(ctx, b.t, id, off, bufs, b.s.url,
		func(e source.Extent, off int64, bufs [][]byte) error { return b.fill(ctx, e, off, bufs, how) })
}

// fill reads bufs from off of the single extent e.
func (b *Blocks) fill(ctx context.Context, e source.Extent, off int64, bufs [][]byte, how source.Read) error {
	at, n, id := e.Offset+off, int64(source.Len(bufs)), e.Ident
	whole := at == 0 && n == id.Size
	switch {
	case !id.HasCRC || !whole && how.CallerChecks:
		_, err := b.fetch(ctx, how, e.Name, id, at, bufs, false)
		return err
	case !whole && id.Size <= stageMax:
		if staged, err := b.stage.read(ctx, how, b, e.Name, id, at, bufs); staged {
			return err
		}
	}
	return b.fetchChecked(ctx, how, e.Name, id, at, bufs)
}

// fetchChecked fills bufs from at of object key with the whole object read through its
// CRC32C (summed as the body arrives), which must match. A mismatch is fetched once more
// (damage in transit); a second one is source.ErrCorrupt. bufs hold whatever arrived until
// then: the caller publishes them only on success.
func (b *Blocks) fetchChecked(ctx context.Context, how source.Read, key string, id source.Identity, at int64, bufs [][]byte) error {
	var bad error
	for try := 0; try < 2; try++ {
		crc, err := b.fetch(ctx, how, key, id, at, bufs, true)
		if err != nil {
			return err
		}
		if bad = source.CheckCRC32C(crc, id.CRC32C); bad == nil {
			return nil
		}
	}
	return &source.Error{Op: "check", Name: b.s.url(key), Off: -1,
		Err: fmt.Errorf("%w (the object is damaged; re-pack the dataset)", bad)}
}

// part is one ranged GET of a fetch: n bytes of the object from off, the first head and the
// last tail of which are only summed and the rest fill bufs.
type part struct {
	off, n     int64
	head, tail int64
	bufs       [][]byte
}

// parts splits [lo, hi) of an object into parts of at most size bytes, for a read that wants
// [at, at+len(bufs)) of it into bufs.
func parts(lo, hi, size, at int64, bufs [][]byte) []part {
	end := at + int64(source.Len(bufs))
	ps := make([]part, 0, (hi-lo+size-1)/size)
	for p0 := lo; p0 < hi; p0 += size {
		p1 := min(p0+size, hi)
		w0, w1 := min(max(at, p0), p1), min(max(end, p0), p1) // the read's bytes in the part
		w1 = max(w1, w0)
		pt := part{off: p0, n: p1 - p0, head: w0 - p0, tail: p1 - w1}
		if w1 > w0 {
			pt.bufs = source.SliceBufs(bufs, w0-at, w1-at)
		}
		ps = append(ps, pt)
	}
	return ps
}

// fetch fills bufs from at of object key (identity id) with ranged GETs of at most PartSize,
// each with If-Match on the ETag, as many at once as the store's pool allows (shared by all
// fetches). With whole, the GETs cover the whole object, the bytes outside bufs' range only
// summed, and fetch returns the object's CRC32C (each part summed as it arrives, the parts
// combined in order); without, they cover bufs' range only, unsummed.
func (b *Blocks) fetch(ctx context.Context, how source.Read, key string, id source.Identity, at int64, bufs [][]byte, whole bool) (uint32, error) {
	lo, hi := at, at+int64(source.Len(bufs))
	if whole {
		lo, hi = 0, id.Size
	}
	ps := parts(lo, hi, b.s.opt.PartSize, at, bufs)
	if len(ps) == 1 {
		return b.s.getRange(ctx, how, key, id.Tag, ps[0], whole)
	}
	crcs := make([]uint32, len(ps))
	first := parallel.Each(ctx, len(ps), 0, func(ctx context.Context, i int) error {
		var err error
		crcs[i], err = b.s.getRange(ctx, how, key, id.Tag, ps[i], whole)
		return err
	})
	if first != nil || !whole {
		return 0, first
	}
	crc := crcs[0]
	for i := 1; i < len(crcs); i++ {
		crc = crc32c.Combine(crc, crcs[i], ps[i].n)
	}
	return crc, nil
}

// getRange reads part p of object key: one ranged GET with If-Match, retried (with a slot of
// the pool per try) until the budget is spent. With sum, it returns the CRC32C of the part's
// bytes, summed as they arrive (readSum).
func (s *Store) getRange(ctx context.Context, how source.Read, key, etag string, p part, sum bool) (uint32, error) {
	var crc uint32
	err := s.retryRead(ctx, how, func(ctx context.Context, progress func()) error {
		body, size, err := s.cl.Get(ctx, key, p.off, p.n, etag)
		if err != nil {
			return err
		}
		defer body.Close()
		progress()
		if size != p.n {
			return fmt.Errorf("the store sent %d bytes for a range of %d", size, p.n)
		}
		crc, err = readSum(progressReader{body, progress}, p, sum)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err() // the caller gave up: not the store's fault
		}
		err = s.describe(err, "") // the source.Error names the object
		if errors.Is(err, fs.ErrNotExist) {
			err = syscall.ENOENT // the object is gone: deleted under the mount
		}
		return 0, &source.Error{Op: "get", Name: s.url(key), Off: p.off, Err: err}
	}
	return crc, nil
}

// scratchSize is the buffer the bytes of a part that no read wants pass through.
const scratchSize = 256 << 10

var scratch = sync.Pool{New: func() any { b := make([]byte, scratchSize); return &b }}

// readSum reads part p's bytes from body: its head and tail through a scratch buffer, the rest
// into its bufs. With sum, it returns their CRC32C, adding each read's bytes to the sum as soon
// as they arrive, while they are still in the CPU's cache: a second pass over a fetched block
// costs memory bandwidth, which is what bounds the rate where the store shares the machine.
func readSum(body io.Reader, p part, sum bool) (uint32, error) {
	var crc uint32
	fill := func(q []byte) error {
		for k := 0; k < len(q); {
			m, err := body.Read(q[k:])
			if sum {
				crc = crc32c.Update(crc, q[k:k+m])
			}
			k += m
			if err == io.EOF && k < len(q) {
				err = io.ErrUnexpectedEOF
			}
			if err != nil && err != io.EOF {
				return fmt.Errorf("reading the body: %w", err)
			}
		}
		return nil
	}
	skip := func(n int64) error {
		if n == 0 {
			return nil
		}
		bp := scratch.Get().(*[]byte)
		defer scratch.Put(bp)
		for n > 0 {
			k := min(n, int64(len(*bp)))
			if err := fill((*bp)[:k]); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
	if err := skip(p.head); err != nil {
		return 0, err
	}
	for _, q := range p.bufs {
		if err := fill(q); err != nil {
			return 0, err
		}
	}
	if err := skip(p.tail); err != nil {
		return 0, err
	}
	return crc, nil
}
