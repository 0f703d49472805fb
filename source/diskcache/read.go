package diskcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/odirect"
	"github.com/blockfs/blockfs/source"
)

// Fill implements source.Blocks: from the cached copy of file id when there is a good one,
// else from the inner source (whose errors it returns as they are), keeping a copy. A failure
// to keep the copy (a full disk) is logged and does not fail the read.
// how goes to the inner source's reads.
func (b *Blocks) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	e, ok := b.t.Extent(id)
	n := int64(source.Len(bufs))
	if !ok || !e.Ident.HasCRC || len(e.Parts) > 0 || e.Size > b.limit || off < 0 || off+n > e.Size || n == 0 {
		return b.inner.Fill(ctx, id, off, bufs, how)
	}
	name := fileName(id, e)
	f := file{id: id, rel: b.ns + "/" + name, path: filepath.Join(b.sub, b.ns, name), size: e.Size, crc: e.Ident.CRC32C}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := b.readCached(ctx, f, off, bufs)
		if err == nil {
			b.hits.Add(1)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, errMiss) {
			b.bad.Add(1)
			b.logf("blockfs: disk cache: %v; deleted, fetching it again", err)
		}
		if !b.keeps(id) {
			// Outside the fixed set: served from the source, not kept (it would only push
			// out a file of the set, or be pushed out before the next epoch needs it).
			if !errors.Is(err, errMiss) {
				b.drop(f)
			}
			b.fetches.Add(1)
			b.fetchedBytes.Add(n)
			return b.inner.Fill(ctx, id, off, bufs, how)
		}
		bad := !errors.Is(err, errMiss)
		again, err, shared := b.inflight.Do(ctx, id, func() (bool, error) { return b.fetch(ctx, f, off, bufs, how, bad) })
		if shared {
			continue // the other fetch has kept a copy (or failed: then try ourselves), or ctx ended
		}
		if !again {
			return err
		}
	}
}

// errMiss: the file is not in the cache.
var errMiss = errors.New("not cached")

// readCached fills bufs from off of f's cached copy, having checked the whole file's CRC32C.
// It returns errMiss when there is no copy, and an error saying what is wrong with a bad one.
func (b *Blocks) readCached(ctx context.Context, f file, off int64, bufs [][]byte) error {
	b.mu.Lock()
	el := b.ents[f.rel]
	if el != nil {
		b.lru.MoveToFront(el)
	}
	b.mu.Unlock()
	if el == nil {
		return errMiss
	}
	// A whole file (the readahead's, into the cache's aligned pages) is read with O_DIRECT
	// when Options.Direct says so; a part streams the file through a chunk buffer, buffered.
	whole := off == 0 && int64(source.Len(bufs)) == f.size
	direct := whole && b.direct.Load() && (b.streams == nil || b.streams(f.id))
	fd, err := b.openCopy(f, direct)
	if errors.Is(err, fs.ErrNotExist) {
		b.forget(f.rel) // deleted under us: fetch it again, quietly
		return errMiss
	}
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%s: is a symbolic link, not a copy (not followed)", f.path)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", f.path, unwrapPath(err))
	}
	defer func() {
		if fd.Refused() {
			b.direct.Store(false) // this filesystem has no O_DIRECT (for these requests)
		}
		fd.Close()
	}()
	st, err := fd.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", f.path, unwrapPath(err))
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: is not a regular file (mode %v), not a copy", f.path, st.Mode())
	}
	if st.Size() != f.size {
		return fmt.Errorf("%s: %w: %d bytes, the manifest says %d", f.path, source.ErrCorrupt, st.Size(), f.size)
	}
	var crc uint32
	if whole {
		at := int64(0)
		for _, p := range bufs {
			if _, err := fd.ReadAt(p, at); err != nil {
				return fmt.Errorf("%s at offset %d: %w", f.path, at, unwrapPath(err))
			}
			crc = crc32c.Update(crc, p)
			at += int64(len(p))
		}
	} else if crc, err = b.readPart(ctx, fd, f, off, bufs); err != nil {
		return err
	}
	if err := source.CheckCRC32C(crc, f.crc); err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	now := unix.NsecToTimespec(time.Now().UnixNano())
	_ = b.at(func(root int) error { // recency for the next mount's LRU
		return unix.UtimesNanoAt(root, f.rel, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW)
	})
	return nil
}

// readPart reads the whole of f's copy in chunks, returning its CRC32C, and copies the bytes
// from off into bufs as they pass: the bytes returned are the bytes checked.
func (b *Blocks) readPart(ctx context.Context, fd io.ReaderAt, f file, off int64, bufs [][]byte) (uint32, error) {
	buf, err := b.getChunk(ctx)
	if err != nil {
		return 0, err
	}
	defer b.putChunk(buf)
	var crc uint32
	for at := int64(0); at < f.size; at += chunkSize {
		p := buf[:min(chunkSize, f.size-at)]
		if _, err := fd.ReadAt(p, at); err != nil {
			return 0, fmt.Errorf("%s at offset %d: %w", f.path, at, unwrapPath(err))
		}
		crc = crc32c.Update(crc, p)
		copyOut(bufs, off, p, at)
	}
	return crc, nil
}

// copyOut copies the part of p (bytes [at, at+len(p)) of a file) that falls in the range of
// the file bufs stand for (from off) into bufs.
func copyOut(bufs [][]byte, off int64, p []byte, at int64) {
	pos := off
	for _, d := range bufs {
		lo, hi := max(pos, at), min(pos+int64(len(d)), at+int64(len(p)))
		if lo < hi {
			copy(d[lo-pos:hi-pos], p[lo-at:hi-at])
		}
		pos += int64(len(d))
		if pos >= at+int64(len(p)) {
			return
		}
	}
}

// getChunk takes a chunk buffer, waiting for one while all are in use.
func (b *Blocks) getChunk(ctx context.Context) ([]byte, error) {
	select {
	case buf := <-b.chunk:
		if buf == nil {
			buf = odirect.AlignedBuf(chunkSize)
		}
		return buf, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *Blocks) putChunk(buf []byte) { b.chunk <- buf }
