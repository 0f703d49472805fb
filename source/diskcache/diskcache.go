// Package diskcache keeps a node-local copy of a remote dataset's files on disk: a
// source.Blocks decorator that sits between the page cache and a remote source (source/s3),
// so each block file is fetched once per node and reused across epochs and remounts.
//
// Layout: DIR/.lock (held with flock by the one mount using DIR), and DIR/NAMESPACE/NAME,
// where NAMESPACE is the dataset's fingerprint (layout.Manifest.Fingerprint: record layout,
// pre-shuffle, every block's size and CRC32C) and NAME is "ID-CRC32C-SIZE.blk" of one file.
// The same data under another prefix or bucket shares the copy; other data never does.
//
// Trust: nothing on disk is believed. Every read of a cached file reads the whole file and
// checks its CRC32C from the manifest before Fill returns, so no byte of a damaged, truncated
// or half-written file reaches the page cache; a bad file is deleted and fetched again. A file
// is written to NAME.tmp and renamed into place, so a crash leaves a temporary file (deleted
// at the next open) or a whole file, never a half file under its name. Files are not fsynced:
// a file that a power cut left short or zeroed fails its check and is fetched again.
//
// Bound: the files in DIR (every namespace) stay within Options.Size bytes. A dataset larger
// than that keeps a fixed set: its files in FileID order (block 0's, block 1's, ...) as many
// as fit; the others are fetched each time and never written. Keeping a fixed set, not the
// most recent files, is what makes each epoch fetch only the data less the cache: epochs visit
// every file once in a new random order, and a least-recently-used bound evicts files before
// their next visit. Files of other datasets (namespaces) and files outside the set left by an
// earlier mount are deleted, least recently used first (recency survives remounts as the
// files' modification times), to make room for the set. DIR may be deleted while no mount
// uses it.
//
// Memory: an index entry per cached file (O(blocks)), and chunk buffers of 1 MiB, at most
// maxChunkBufs of them, for reads of part of a file; whole-file reads (the readahead's) go
// straight into the caller's buffers.
//
// Lock order: Blocks.mu, and the lock inside Blocks.inflight (flight.Group), never held
// together; no I/O but unlink and utimes under Blocks.mu.
package diskcache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/flight"
	"github.com/blockfs/blockfs/internal/odirect"
	"github.com/blockfs/blockfs/source"
)

// ErrBusy: another process holds the cache directory's lock.
var ErrBusy = errors.New("is in use by another blockfs mount (one mount per disk cache directory)")

// Options configure a disk cache.
type Options struct {
	// Dir is the cache directory; created if missing. Required.
	Dir string
	// Size bounds the bytes of cached files in Dir (all namespaces). Required, > 0.
	Size int64
	// Namespace is the dataset's fingerprint: a subdirectory of Dir (hex digits). Required.
	Namespace string
	// Direct reads cached files with O_DIRECT where a read is aligned (the cache's pages
	// are), so they are not kept in the kernel's page cache as well; false reads them
	// buffered, so the kernel keeps them between epochs (the mount's --direct decides, as
	// for a local dataset). Copies are written with O_DIRECT either way where the filesystem
	// allows it: the first epoch's copy costs no pass through the page cache.
	Direct bool
	// Streams, when set with Direct, names the files read with O_DIRECT; the others are read
	// buffered, so the kernel keeps them (the mount's resident set, view.MemoryPlan.Streams).
	Streams func(source.FileID) bool
	// Files is how many FileIDs the table has (0 to Files-1); the fixed set kept on disk is
	// chosen among them. 0: no fixed set, every file is kept (least recently used go).
	Files source.FileID
	// Logf logs a damaged file, a failed write and the like; default log.Printf.
	Logf func(format string, args ...any)
}

var namespaceRE = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

// Validate checks the options and applies defaults.
func (o *Options) Validate() error {
	switch {
	case o.Dir == "":
		return errors.New("no directory")
	case o.Size <= 0:
		return fmt.Errorf("size %d must be positive", o.Size)
	case !namespaceRE.MatchString(o.Namespace):
		return fmt.Errorf("namespace %q is not a fingerprint (hex digits)", o.Namespace)
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	return nil
}

// Stats are a disk cache's counters since Open.
type Stats struct {
	Hits    int64 `json:"hits"`    // Fills served from a cached file
	Fetches int64 `json:"fetches"` // files fetched from the source (written to disk if in the set)
	// FetchedBytes counts the bytes fetched from the source: what an epoch costs the store.
	FetchedBytes int64 `json:"fetched_bytes"`
	Evicted      int64 `json:"evicted"`      // files deleted to stay within Size
	Bad          int64 `json:"bad"`          // cached files that failed their check (deleted, fetched again)
	WriteErr     int64 `json:"write_errors"` // files that could not be written (ENOSPC, EIO, ...): served, not kept
	Used         int64 `json:"bytes"`        // bytes of cached files now
	Files        int64 `json:"files"`        // cached files now
}

// Blocks is a source.Blocks that serves the files of t from Dir when it holds a good copy,
// and otherwise from inner, keeping a copy. Only files with a checksum (Ident.HasCRC) of at
// most Size bytes and a single extent are cached; others pass through. Safe for concurrent use.
type Blocks struct {
	// Immutable after Open.
	inner   source.Blocks
	t       source.Table
	dir     string
	ns      string
	limit   int64
	logf    func(string, ...any)
	lock    *os.File
	streams func(source.FileID) bool
	// keepBelow: files with a smaller FileID are kept on disk, the others fetched each time
	// (the fixed set); all files when the set is not in use.
	keepBelow source.FileID
	// direct: read with O_DIRECT (Options.Direct; cleared if the filesystem refuses it).
	direct atomic.Bool
	chunk  chan []byte // free chunk buffers (maxChunkBufs)

	hits, fetches, fetchedBytes, evicted, bad, writeErr atomic.Int64

	// inflight merges fetches of the same file: one fetches and keeps a copy, the others
	// wait for it and then read the copy.
	inflight flight.Group[source.FileID, bool]

	mu    sync.Mutex
	ents  map[string]*list.Element // cached files by "NAMESPACE/NAME"; values *entry (guarded by mu)
	lru   *list.List               // most recent first (guarded by mu)
	used  int64                    // bytes of cached files and reservations (guarded by mu)
	dirOK bool                     // the namespace directory exists (guarded by mu)
}

type entry struct {
	rel  string
	size int64
	keep bool // one of this mount's fixed set: evicted only if nothing else can go
}

const (
	chunkSize    = 1 << 20
	maxChunkBufs = 4
	lockName     = ".lock"
	tmpSuffix    = ".tmp"
)

// Open returns inner with a disk cache in opt.Dir for the files of t. It takes the directory's
// lock (ErrBusy if another mount has it), deletes temporary files a crash left, indexes the
// cached files and deletes the least recent ones beyond opt.Size.
func Open(inner source.Blocks, t source.Table, opt Options) (*Blocks, error) {
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("disk cache: %w", err)
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("disk cache %s: %w", opt.Dir, unwrapPath(err))
	}
	lf, err := os.OpenFile(filepath.Join(opt.Dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disk cache %s: %w", opt.Dir, unwrapPath(err))
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lf.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("disk cache %s %w", opt.Dir, ErrBusy)
		}
		return nil, fmt.Errorf("disk cache %s: lock: %w", opt.Dir, err)
	}
	b := &Blocks{inner: inner, t: t, dir: opt.Dir, ns: opt.Namespace, limit: opt.Size, logf: opt.Logf, lock: lf,
		chunk: make(chan []byte, maxChunkBufs), ents: map[string]*list.Element{}, lru: list.New(),
		streams: opt.Streams, keepBelow: keepBelow(t, opt)}
	b.direct.Store(opt.Direct)
	for range maxChunkBufs {
		b.chunk <- nil // allocated on first use
	}
	if err := b.scan(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("disk cache %s: %w", opt.Dir, unwrapPath(err))
	}
	b.mu.Lock()
	gone := b.evictLocked(0)
	b.mu.Unlock()
	b.remove(gone)
	return b, nil
}

// keepBelow returns the first FileID outside the fixed set: the files before it that can be
// cached (a checksum, one extent) fit in opt.Size together. Without opt.Files, every FileID.
func keepBelow(t source.Table, opt Options) source.FileID {
	if opt.Files == 0 {
		return ^source.FileID(0)
	}
	var used int64
	for id := source.FileID(0); id < opt.Files; id++ {
		e, ok := t.Extent(id)
		if !ok || !e.Ident.HasCRC || len(e.Parts) > 0 {
			continue
		}
		if used+e.Size > opt.Size {
			return id
		}
		used += e.Size
	}
	return opt.Files
}

// KeptFiles returns how many of the table's FileIDs are in the fixed set kept on disk (the
// first ones), or -1 when every file is kept.
func (b *Blocks) KeptFiles() int64 {
	if b.keepBelow == ^source.FileID(0) {
		return -1
	}
	return int64(b.keepBelow)
}

// Close releases the directory's lock. Fills must have finished.
func (b *Blocks) Close() error { return b.lock.Close() }

// Stats returns the counters.
func (b *Blocks) Stats() Stats {
	b.mu.Lock()
	used, files := b.used, int64(b.lru.Len())
	b.mu.Unlock()
	return Stats{Hits: b.hits.Load(), Fetches: b.fetches.Load(), FetchedBytes: b.fetchedBytes.Load(), Evicted: b.evicted.Load(), Bad: b.bad.Load(),
		WriteErr: b.writeErr.Load(), Used: used, Files: files}
}

// Limit returns the bound on cached bytes.
func (b *Blocks) Limit() int64 { return b.limit }

// scan indexes DIR/*/* (oldest modification first), deleting temporary files.
func (b *Blocks) scan() error {
	dirs, err := os.ReadDir(b.dir)
	if err != nil {
		return err
	}
	type found struct {
		rel   string
		size  int64
		mtime time.Time
	}
	var all []found
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(b.dir, d.Name()))
		if err != nil {
			return err
		}
		for _, e := range ents {
			rel := d.Name() + "/" + e.Name()
			if strings.HasSuffix(e.Name(), tmpSuffix) {
				_ = os.Remove(filepath.Join(b.dir, rel)) // a crash's leftover: never trusted
				continue
			}
			if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".blk") {
				continue
			}
			st, err := e.Info()
			if err != nil {
				continue // deleted meanwhile
			}
			all = append(all, found{rel, st.Size(), st.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mtime.Before(all[j].mtime) })
	for _, f := range all {
		b.ents[f.rel] = b.lru.PushFront(&entry{rel: f.rel, size: f.size, keep: b.inSet(f.rel)})
		b.used += f.size
	}
	return nil
}

// inSet reports whether the cached file rel ("NAMESPACE/ID-CRC-SIZE.blk") is one of this
// mount's fixed set.
func (b *Blocks) inSet(rel string) bool {
	ns, name, ok := strings.Cut(rel, "/")
	if !ok || ns != b.ns {
		return false
	}
	var id source.FileID
	if _, err := fmt.Sscanf(name, "%d-", &id); err != nil || id >= b.keepBelow {
		return false
	}
	e, ok := b.t.Extent(id)
	return ok && e.Ident.HasCRC && name == fileName(id, e)
}

// fileName is the name of file id's copy: "ID-CRC32C-SIZE.blk".
func fileName(id source.FileID, e source.Extent) string {
	return fmt.Sprintf("%d-%08x-%d.blk", id, e.Ident.CRC32C, e.Size)
}

// file is one cacheable file of the table.
type file struct {
	id   source.FileID
	rel  string // NAMESPACE/NAME
	path string
	size int64
	crc  uint32
}

// Size implements source.Blocks.
func (b *Blocks) Size(id source.FileID) int64 { return b.inner.Size(id) }

// Fill implements source.Blocks: from the cached copy of file id when there is a good one,
// else from the inner source (whose errors it returns as they are), keeping a copy. A failure
// to keep the copy (a full disk) is logged and does not fail the read.
func (b *Blocks) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte) error {
	e, ok := b.t.Extent(id)
	n := int64(source.Len(bufs))
	if !ok || !e.Ident.HasCRC || len(e.Parts) > 0 || e.Size > b.limit || off < 0 || off+n > e.Size || n == 0 {
		return b.inner.Fill(ctx, id, off, bufs)
	}
	name := fileName(id, e)
	f := file{id: id, rel: b.ns + "/" + name, path: filepath.Join(b.dir, b.ns, name), size: e.Size, crc: e.Ident.CRC32C}
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
		if id >= b.keepBelow {
			// Outside the fixed set: served from the source, not kept (it would only push
			// out a file of the set, or be pushed out before the next epoch needs it).
			if !errors.Is(err, errMiss) {
				b.drop(f)
			}
			b.fetches.Add(1)
			b.fetchedBytes.Add(n)
			return b.inner.Fill(ctx, id, off, bufs)
		}
		bad := !errors.Is(err, errMiss)
		again, err, shared := b.inflight.Do(ctx, id, func() (bool, error) { return b.fetch(ctx, f, off, bufs, bad) })
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
	fd, err := openFile(f.path, os.O_RDONLY, direct)
	if errors.Is(err, fs.ErrNotExist) {
		b.forget(f.rel) // deleted under us: fetch it again, quietly
		return errMiss
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
	if err := crc32c.Check(crc, f.crc); err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	now := time.Now()
	_ = os.Chtimes(f.path, now, now) // recency for the next mount's LRU
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

// fetch fills bufs from the inner source and keeps a copy of f; it runs as the one fetch of
// f.id in progress (inflight).
// With bad, the copy on disk failed its check and goes first. It reports again when a copy
// appeared before it started (another fetch just finished): then the caller reads that.
func (b *Blocks) fetch(ctx context.Context, f file, off int64, bufs [][]byte, bad bool) (again bool, err error) {
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
		if err := b.inner.Fill(ctx, f.id, 0, bufs); err != nil {
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
	var crc uint32
	kept := b.keep(f, func(w io.Writer) error {
		crc = 0
		for at := int64(0); at < f.size; at += chunkSize {
			p := buf[:min(chunkSize, f.size-at)]
			b.fetchedBytes.Add(int64(len(p)))
			if err := b.inner.Fill(ctx, f.id, at, [][]byte{p}); err != nil {
				return &fillError{err}
			}
			crc = crc32c.Update(crc, p)
			copyOut(bufs, off, p, at)
			if _, err := w.Write(p); err != nil {
				return err
			}
		}
		if err := crc32c.Check(crc, f.crc); err != nil {
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
		return false, b.inner.Fill(ctx, f.id, off, bufs) // not kept: read the part alone
	}
	return false, nil
}

// fillError is a failure of the inner source inside keep's writer (not a disk error).
type fillError struct{ err error }

func (e *fillError) Error() string { return e.err.Error() }

// errNotKept: keep did not start a copy (no room, or the directory cannot be written); write
// was not called.
var errNotKept = errors.New("not kept")

// keep writes f's copy with write (the file's bytes, in order) to a temporary file and renames
// it into place, making room first. A disk error is logged and counted and the copy dropped.
// keep returns errNotKept when it could not start, write's own error (a *fillError, or the
// disk's: then the bytes were not all produced), or nil.
func (b *Blocks) keep(f file, write func(io.Writer) error) error {
	b.mu.Lock()
	gone := b.evictLocked(f.size)
	fits := b.used+f.size <= b.limit
	if fits {
		b.used += f.size // reserved
	}
	dirOK := b.dirOK
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
	if !dirOK {
		// Made once per mount, and again if the directory was deleted under the mount.
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			unreserve()
			b.writeFailed(f, err)
			return errNotKept
		}
		b.mu.Lock()
		b.dirOK = true
		b.mu.Unlock()
	}
	tmp := f.path + tmpSuffix
	w, err := createTemp(tmp)
	if err != nil {
		unreserve()
		if errors.Is(err, fs.ErrNotExist) {
			b.mu.Lock()
			b.dirOK = false
			b.mu.Unlock()
		}
		b.writeFailed(f, err)
		return errNotKept
	}
	werr := write(w)
	cerr := w.Close()
	var fe *fillError
	if werr == nil && cerr == nil {
		if cerr = os.Rename(tmp, f.path); cerr == nil {
			b.mu.Lock()
			if old := b.ents[f.rel]; old != nil { // not expected with the fetch merged; keep the count right
				b.used -= old.Value.(*entry).size
				b.lru.Remove(old)
			}
			b.ents[f.rel] = b.lru.PushFront(&entry{rel: f.rel, size: f.size, keep: f.id < b.keepBelow})
			b.mu.Unlock()
			return nil
		}
	}
	_ = os.Remove(tmp)
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

// evictLocked takes files out of the index until need more bytes fit within the limit, and
// returns their paths for the caller to delete after unlocking: the least recent files
// outside the fixed set first, then (only if that is not enough) the set's. Requires b.mu.
func (b *Blocks) evictLocked(need int64) []string {
	var gone []string
	for pass := 0; pass < 2 && b.used+need > b.limit; pass++ {
		for el := b.lru.Back(); el != nil && b.used+need > b.limit; {
			prev := el.Prev()
			if e := el.Value.(*entry); pass == 1 || !e.keep {
				b.lru.Remove(el)
				delete(b.ents, e.rel)
				b.used -= e.size
				gone = append(gone, filepath.Join(b.dir, filepath.FromSlash(e.rel)))
			}
			el = prev
		}
	}
	return gone
}

// remove deletes evicted files.
func (b *Blocks) remove(paths []string) {
	for _, p := range paths {
		b.evicted.Add(1)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.logf("blockfs: disk cache: %v", err)
		}
	}
}

// drop deletes f's copy, which failed its check, and takes it out of the index.
func (b *Blocks) drop(f file) {
	b.forget(f.rel)
	if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.logf("blockfs: disk cache: %v", err)
	}
}

// forget takes rel out of the index (its file is gone or bad).
func (b *Blocks) forget(rel string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el := b.ents[rel]; el != nil {
		b.used -= el.Value.(*entry).size
		b.lru.Remove(el)
		delete(b.ents, rel)
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

// unwrapPath drops an *fs.PathError's repetition of the path we print ourselves.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w (the file is shorter than it was)", io.ErrUnexpectedEOF)
	}
	return err
}

var _ source.Blocks = (*Blocks)(nil)
