package diskcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/source"
)

// fetch fills bufs from the inner source and keeps a copy of f; it runs as the one fetch of
// f.id in progress (inflight). With bad, the copy on disk failed its check and goes first. It
// reports again when a copy appeared before it started (another fetch just finished): then
// the caller reads that.
func (b *Blocks) fetch(ctx context.Context, f file, off int64, bufs [][]byte, how source.Read, bad bool) (again bool, err error) {
	b.mu.Lock()
	_, have := b.ents[f.rel]
	b.mu.Unlock()
	if bad {
		b.drop(f)
	} else if have {
		return true, nil
	}
	b.fetches.Add(1)
	whole := off == 0 && int64(source.Len(bufs)) == f.size
	if whole {
		b.fetchedBytes.Add(f.size)
		if err := b.inner.Fill(ctx, f.id, 0, bufs, how); err != nil {
			return false, err
		}
		_ = b.keep(f, func(w io.Writer) error { // the bytes are served either way
			for _, p := range bufs {
				if _, err := w.Write(p); err != nil {
					return err
				}
			}
			return nil
		})
		return false, nil
	}
	// Part of a file: stream the whole file through a chunk buffer into the copy, taking the
	// part on the way (the inner source fetches and checks the object once and hands it out).
	buf, err := b.getChunk(ctx)
	if err != nil {
		return false, err
	}
	defer b.putChunk(buf)
	// This loop sums every byte of the file and checks it before any is served: the inner
	// source may read each chunk alone (an object store would otherwise read and check the
	// whole object for each chunk).
	checked := how.Checked()
	var crc uint32
	kept := b.keep(f, func(w io.Writer) error {
		crc = 0
		for at := int64(0); at < f.size; at += chunkSize {
			p := buf[:min(chunkSize, f.size-at)]
			b.fetchedBytes.Add(int64(len(p)))
			if err := b.inner.Fill(ctx, f.id, at, [][]byte{p}, checked); err != nil {
				return &fillError{err}
			}
			crc = crc32c.Update(crc, p)
			copyOut(bufs, off, p, at)
			if _, err := w.Write(p); err != nil {
				return err
			}
		}
		if err := source.CheckCRC32C(crc, f.crc); err != nil {
			return &fillError{&source.Error{Op: "check", Name: f.path, Off: -1, Err: err}}
		}
		return nil
	})
	var fe *fillError
	switch {
	case errors.As(kept, &fe):
		return false, fe.err
	case kept != nil:
		b.fetchedBytes.Add(int64(source.Len(bufs)))
		return false, b.inner.Fill(ctx, f.id, off, bufs, how) // not kept: read the part alone
	}
	return false, nil
}

// fillError is a failure of the inner source inside keep's writer (not a disk error).
type fillError struct{ err error }

// errNotKept: keep did not start a copy (no room, or the directory cannot be written); write
// was not called.
var errNotKept = errors.New("not kept")

// keep writes f's copy with write (the file's bytes, in order) to a new temporary file
// (createTemp) and renames it into place, making room first. A disk error is logged and
// counted and the copy dropped. keep returns errNotKept when it could not start, write's own
// error (a *fillError, or the disk's: then the bytes were not all produced), or nil.
func (b *Blocks) keep(f file, write func(io.Writer) error) error {
	b.mu.Lock()
	gone := b.evictLocked(f.size)
	fits := b.used+f.size <= b.limit
	if fits {
		b.used += f.size // reserved
	}
	b.mu.Unlock()
	b.remove(gone)
	if !fits {
		return errNotKept // larger than the bound: served, not kept
	}
	unreserve := func() {
		b.mu.Lock()
		b.used -= f.size
		b.mu.Unlock()
	}
	w, tmp, err := b.createTemp(f)
	if errors.Is(err, fs.ErrNotExist) {
		// The namespace directory is made on the first file kept, and again if it (or the
		// whole directory) was deleted under the mount.
		if err = b.prepare(); err == nil {
			w, tmp, err = b.createTemp(f)
		}
	}
	if err != nil {
		unreserve()
		b.writeFailed(f, err)
		return errNotKept
	}
	werr := write(w)
	cerr := w.Close()
	var fe *fillError
	if werr == nil && cerr == nil {
		cerr = b.at(func(root int) error { return unix.Renameat(root, tmp, root, f.rel) })
		if cerr == nil {
			b.mu.Lock()
			if old := b.ents[f.rel]; old != nil { // not expected with the fetch merged; keep the count right
				b.used -= old.Value.(*entry).size
				b.lru.Remove(old)
			}
			b.ents[f.rel] = b.lru.PushFront(&entry{rel: f.rel, size: f.size, keep: b.keeps(f.id)})
			b.mu.Unlock()
			return nil
		}
		cerr = fmt.Errorf("rename: %w", cerr)
	}
	_ = b.unlinkAt(tmp)
	unreserve()
	switch {
	case errors.As(werr, &fe):
		return werr
	case werr != nil:
		b.writeFailed(f, werr)
		return werr
	default:
		b.writeFailed(f, cerr)
		return nil // the bytes were all produced; only the copy is lost
	}
}

// writeFailed logs a copy that could not be kept.
func (b *Blocks) writeFailed(f file, err error) {
	if b.writeErr.Add(1) <= 10 {
		b.logf("blockfs: disk cache: cannot keep %s: %v (served from the store; not cached)", f.path, unwrapPath(err))
	}
}
