package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/source"
)

// Blocks implements source.Blocks over the objects a table names (keys, with the size and
// ETag seen when the dataset opened, and the manifest's CRC32C). Safe for concurrent use.
//
// A read of a whole object (the cache loads a block file in one run) is fetched straight into
// the caller's buffers in ranged GETs of PartSize, Concurrency at a time across all reads, and
// its CRC32C checked before Fill returns. A read of part of an object with a checksum fetches
// the whole object into a small staging area (stager), checks it, and copies the part out;
// the rest stays there for the next read of the same object.
type Blocks struct {
	s     *Store       // immutable
	t     source.Table // immutable
	stage *stager
}

// stageBudget is how many bytes of partly read objects Blocks keeps (two 16 MiB blocks).
const stageBudget = 32 << 20

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
func (b *Blocks) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte) error {
	return source.FillTable(ctx, b.t, id, off, bufs, b.s.url,
		func(e source.Extent, off int64, bufs [][]byte) error { return b.fill(ctx, e, off, bufs) })
}

// fill reads bufs from off of the single extent e.
func (b *Blocks) fill(ctx context.Context, e source.Extent, off int64, bufs [][]byte) error {
	at, n, id := e.Offset+off, int64(source.Len(bufs)), e.Ident
	switch {
	case id.HasCRC && at == 0 && n == id.Size:
		return b.fetchChecked(ctx, e.Name, id, bufs)
	case id.HasCRC && id.Size <= b.s.opt.MaxStage:
		return b.stage.read(ctx, b, e.Name, id, at, bufs)
	default:
		_, err := b.fetch(ctx, e.Name, id.Tag, at, bufs, false)
		return err
	}
}

// fetchChecked fills bufs with the whole object key and checks its CRC32C, summed as the
// body arrives. A mismatch is fetched once more (damage in transit); a second one is
// source.ErrCorrupt.
func (b *Blocks) fetchChecked(ctx context.Context, key string, id source.Identity, bufs [][]byte) error {
	var bad error
	for try := 0; try < 2; try++ {
		crc, err := b.fetch(ctx, key, id.Tag, 0, bufs, true)
		if err != nil {
			return err
		}
		if bad = crc32c.Check(crc, id.CRC32C); bad == nil {
			return nil
		}
	}
	return &source.Error{Op: "check", Name: b.s.url(key), Off: -1,
		Err: fmt.Errorf("%w (the object is damaged; re-pack the dataset)", bad)}
}

// fetch fills bufs from off of object key with ranged GETs of at most PartSize, each with
// If-Match etag, as many at once as the store's Concurrency allows (shared by all fetches).
// With sum, it returns the CRC32C of the bytes read (each part summed as it arrives, the
// parts combined in order).
func (b *Blocks) fetch(ctx context.Context, key, etag string, off int64, bufs [][]byte, sum bool) (uint32, error) {
	n := int64(source.Len(bufs))
	part := b.s.opt.PartSize
	if n <= part {
		return b.s.getRange(ctx, key, etag, off, bufs, sum)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		crcs  = make([]uint32, (n+part-1)/part)
	)
	for i := range crcs {
		at := int64(i) * part
		k := min(part, n-at)
		wg.Add(1)
		go func() {
			defer wg.Done()
			crc, err := b.s.getRange(ctx, key, etag, off+at, source.SliceBufs(bufs, at, at+k), sum)
			if err != nil {
				once.Do(func() { first = err; cancel() })
			}
			crcs[i] = crc
		}()
	}
	wg.Wait()
	if first != nil || !sum {
		return 0, first
	}
	crc := crcs[0]
	for i := 1; i < len(crcs); i++ {
		crc = crc32c.Combine(crc, crcs[i], min(part, n-int64(i)*part))
	}
	return crc, nil
}

// getRange fills bufs with the n bytes of object key from off: one ranged GET with If-Match,
// retried (with a token of the concurrency pool per attempt) until the budget is spent. With
// sum, it returns the CRC32C of the bytes, summed as they arrive (readSum).
func (s *Store) getRange(ctx context.Context, key, etag string, off int64, bufs [][]byte, sum bool) (uint32, error) {
	n := int64(source.Len(bufs))
	var crc uint32
	err := s.retry(ctx, func(ctx context.Context) error {
		var opt minio.GetObjectOptions
		if etag != "" {
			if err := opt.SetMatchETag(etag); err != nil {
				return err
			}
		}
		if err := opt.SetRange(off, off+n-1); err != nil {
			return err
		}
		body, info, _, err := s.cl.GetObject(ctx, s.loc.Bucket, key, opt)
		if err != nil {
			return err
		}
		defer body.Close()
		if info.Size != n {
			return fmt.Errorf("the store sent %d bytes for a range of %d", info.Size, n)
		}
		crc, err = readSum(body, bufs, sum)
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
		return 0, &source.Error{Op: "get", Name: s.url(key), Off: off, Err: err}
	}
	return crc, nil
}

// readSum fills bufs from body and, with sum, returns their CRC32C, adding each read's bytes
// to the sum as soon as they arrive, while they are still in the CPU's cache: a second pass
// over a fetched block costs memory bandwidth, which is what bounds the rate where the store
// shares the machine.
func readSum(body io.Reader, bufs [][]byte, sum bool) (uint32, error) {
	var crc uint32
	for _, p := range bufs {
		for k := 0; k < len(p); {
			m, err := body.Read(p[k:])
			if sum {
				crc = crc32c.Update(crc, p[k:k+m])
			}
			k += m
			if err == io.EOF && k < len(p) {
				err = io.ErrUnexpectedEOF
			}
			if err != nil && err != io.EOF {
				return 0, fmt.Errorf("reading the body: %w", err)
			}
		}
	}
	return crc, nil
}

// retry runs fn until it succeeds, fails in a way a retry cannot mend, or Retries retries
// have failed, waiting Backoff (doubling, with jitter) between tries. Each try holds a token
// of the concurrency pool (waiting for one does not count) and has Timeout to finish.
func (s *Store) retry(ctx context.Context, fn func(context.Context) error) error {
	return s.retryFor(ctx, s.opt.Timeout, fn)
}

// retryFor is retry with a time limit of timeout per try (0: none).
func (s *Store) retryFor(ctx context.Context, timeout time.Duration, fn func(context.Context) error) error {
	wait := s.opt.Backoff
	for try := 0; ; try++ {
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		var actx context.Context
		var cancel context.CancelFunc
		if timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, timeout)
		} else {
			actx, cancel = context.WithCancel(ctx)
		}
		err := fn(actx)
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		<-s.sem
		if err == nil {
			return nil
		}
		if timedOut {
			err = fmt.Errorf("no answer within %v: %w", timeout, errTimeout)
		}
		if ctx.Err() != nil || try >= s.opt.Retries || !retryable(err) {
			return err
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}

var errTimeout = errors.New("request timed out")

// retryable reports whether a failed request may succeed when tried again: server errors,
// throttling and anything that is not an answer (a reset, a refused connection, a timeout, a
// truncated body). A missing object, a changed ETag, a bad range or a refusal are final.
func retryable(err error) bool {
	er := minio.ToErrorResponse(err)
	if er.StatusCode == 0 && er.Code == "" {
		return true // no answer from the store
	}
	switch er.Code {
	case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed":
		return true
	}
	return er.StatusCode >= 500 || er.StatusCode == http.StatusTooManyRequests || er.StatusCode == http.StatusRequestTimeout
}
