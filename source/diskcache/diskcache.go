// Package diskcache keeps a node-local copy of a remote dataset's files on disk: a
// source.Blocks decorator that sits between the page cache and a remote source (source/s3),
// so each block file is fetched once per node and reused across epochs and remounts.
//
// Layout: DIR/blockfs-cache-UID/NAMESPACE/NAME, where blockfs-cache-UID is the mounting
// user's own directory (dir.go: mode 0700, marked by a CACHEDIR.TAG, locked by the one mount
// using it), NAMESPACE is the dataset's fingerprint (layout.Manifest.Fingerprint: record
// layout, pre-shuffle, every block's size and CRC32C) and NAME is "ID-CRC32C-SIZE.blk" of one
// file. The same data under another prefix or bucket shares the copy; other data never does.
// Nothing outside the own directory is ever written, deleted or evicted, and inside it only
// names of the cache's own patterns: DIR may be shared with other users' files. The layout
// before the own directory (DIR/.lock, DIR/NAMESPACE/NAME) is left alone, and logged.
//
// Hostile neighbours: every file is opened relative to the own directory's descriptor with
// O_NOFOLLOW; copies are written to a temporary file of a name of their own, created with
// O_EXCL (mode 0600) and renamed into place; a copy is opened with O_NONBLOCK and must be a
// regular file. So a symbolic link or a FIFO in a copy's place is never followed nor waited
// on: the copy is deleted and fetched again.
//
// Trust: nothing on disk is believed. Every read of a cached file reads the whole file and
// checks its CRC32C from the manifest before Fill returns, so no byte of a damaged, truncated
// or half-written file reaches the page cache; a bad file is deleted and fetched again. A file
// is written to NAME.RANDOM.tmp and renamed into place, so a crash leaves a temporary file
// (deleted at the next open) or a whole file, never a half file under its name. Files are not
// fsynced: a file that a power cut left short or zeroed fails its check and is fetched again.
//
// Bound: the files in the own directory (every namespace) stay within Options.Size bytes. A
// dataset larger than that keeps a fixed set: its files in FileID order (block 0's, block 1's,
// ...) as many as fit; the others are fetched each time and never written. Keeping a fixed set,
// not the most recent files, is what makes each epoch fetch only the data less the cache:
// epochs visit every file once in a new random order, and a least-recently-used bound evicts
// files before their next visit. Files of other datasets (namespaces) and files outside the set
// left by an earlier mount are deleted, least recently used first (recency survives remounts as
// the files' modification times), to make room for the set. DIR may be deleted at any time: a
// live mount makes its directory again when it next keeps a file (and still holds the lock).
//
// Memory: an index entry per cached file (O(blocks)), and chunk buffers of 1 MiB, at most
// maxChunkBufs of them, for reads of part of a file; whole-file reads (the readahead's) go
// straight into the caller's buffers.
//
// Lock order: Blocks.mu, Blocks.rootMu and the lock inside Blocks.inflight (flight.Group),
// never two of them together; no I/O under Blocks.mu, and under Blocks.rootMu only single
// system calls relative to the own directory (and its remaking, with rootMu held to write).
package diskcache

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/flight"
	"github.com/blockfs/blockfs/source"
)

// ErrBusy: another process holds the cache directory's lock.
var ErrBusy = errors.New("is in use by another blockfs mount (one mount per disk cache directory)")

// Options configure a disk cache.
type Options struct {
	// Dir is the cache directory; created (mode 0700) if missing. The cache keeps its files
	// in a directory of its own inside it, subDir(Dir). Required.
	Dir string
	// Size bounds the bytes of cached files in the own directory (all namespaces). Required,
	// > 0.
	Size int64
	// Namespace is the dataset's fingerprint: a subdirectory of the own directory (hex
	// digits). Required.
	Namespace string
	// Direct reads cached files with O_DIRECT where a read is aligned (the cache's pages
	// are), so they are not kept in the kernel's page cache as well; false reads them
	// buffered, so the kernel keeps them between epochs (the mount's --direct decides, as
	// for a local dataset). Copies are written with O_DIRECT either way where the filesystem
	// allows it: the first epoch's copy costs no pass through the page cache.
	Direct bool
	// Streams, when set with Direct, names the files read with O_DIRECT; the others are read
	// buffered, so the kernel keeps them (the mount's resident set, memory.Plan.Streams).
	Streams func(source.FileID) bool
	// Files is how many FileIDs the table has (0 to Files-1); the fixed set kept on disk is
	// chosen among them. 0: no fixed set, every file is kept (least recently used go).
	Files source.FileID
	// Keep, when set, lists the FileIDs (below Files) the fixed set is chosen among, in the
	// order it takes them: a node-aware mount's own blocks first (its parts), so a node keeps
	// what it reads. Nil: every FileID, in FileID order.
	Keep []source.FileID
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
	dir     string // Options.Dir
	sub     string // the own directory, subDir(dir), for messages: files are opened relative to root
	ns      string
	limit   int64
	logf    func(string, ...any)
	claim   io.Closer // the lock's name (claimName); nil without one
	streams func(source.FileID) bool
	// kept is the fixed set: a bit per FileID of the files kept on disk, the others fetched
	// each time; nil when the set is not in use (every file is kept). nkept counts its files.
	kept  []uint64
	nkept int64
	// direct: read with O_DIRECT (Options.Direct; cleared if the filesystem refuses it).
	direct atomic.Bool
	chunk  chan []byte // free chunk buffers (maxChunkBufs)

	hits, fetches, fetchedBytes, evicted, bad, writeErr atomic.Int64

	// inflight merges fetches of the same file: one fetches and keeps a copy, the others
	// wait for it and then read the copy.
	inflight flight.Group[source.FileID, bool]

	// rootMu guards root, the own directory's descriptor (flock held): held to read for a
	// system call relative to it (at), to write to make the directory again (prepare).
	rootMu sync.RWMutex
	root   int

	mu   sync.Mutex
	ents map[string]*list.Element // cached files by "NAMESPACE/NAME"; values *entry (guarded by mu)
	lru  *list.List               // most recent first (guarded by mu)
	used int64                    // bytes of cached files and reservations (guarded by mu)
}

type entry struct {
	rel  string
	size int64
	keep bool // one of this mount's fixed set: evicted only if nothing else can go
}

const (
	chunkSize    = 1 << 20
	maxChunkBufs = 4
	tmpSuffix    = ".tmp"
)

// Open returns inner with a disk cache in opt.Dir for the files of t. It makes or checks the
// cache's own directory in opt.Dir (ErrNotOurs if something else is in its place), takes its
// lock (ErrBusy if another mount has it), deletes temporary files a crash left, indexes the
// cached files and deletes the least recent ones beyond opt.Size.
func Open(inner source.Blocks, t source.Table, opt Options) (*Blocks, error) {
	if err := opt.Validate(); err != nil {
		return nil, fmt.Errorf("disk cache: %w", err)
	}
	sub := subDir(opt.Dir)
	if err := makeDir(opt.Dir); err != nil {
		return nil, fmt.Errorf("disk cache %s: %w", opt.Dir, err)
	}
	key := sub
	if real, err := filepath.EvalSymlinks(opt.Dir); err == nil {
		if abs, err := filepath.Abs(real); err == nil {
			key = subDir(abs) // one name however DIR is written
		}
	}
	claim, err := claimName(key, opt.Logf)
	if err != nil {
		return nil, fmt.Errorf("disk cache %s %w", opt.Dir, err)
	}
	fail := func(err error) (*Blocks, error) {
		if claim != nil {
			claim.Close()
		}
		if errors.Is(err, ErrBusy) {
			return nil, fmt.Errorf("disk cache %s %w", opt.Dir, err)
		}
		return nil, fmt.Errorf("disk cache %s: %w", opt.Dir, err)
	}
	fd, err := openOwn(opt.Dir, sub)
	if err != nil {
		return fail(err)
	}
	if err := lockDir(fd); err != nil {
		unix.Close(fd)
		return fail(err)
	}
	b := &Blocks{inner: inner, t: t, dir: opt.Dir, sub: sub, ns: opt.Namespace, limit: opt.Size, logf: opt.Logf,
		claim: claim, root: fd, chunk: make(chan []byte, maxChunkBufs), ents: map[string]*list.Element{}, lru: list.New(),
		streams: opt.Streams}
	b.kept, b.nkept = fixedSet(t, opt)
	b.direct.Store(opt.Direct)
	for range maxChunkBufs {
		b.chunk <- nil // allocated on first use
	}
	if err := b.scan(); err != nil {
		b.Close()
		return nil, fmt.Errorf("disk cache %s: %w", opt.Dir, unwrapPath(err))
	}
	b.mu.Lock()
	gone := b.evictLocked(0)
	b.mu.Unlock()
	b.remove(gone)
	if n, ok := oldLayout(opt.Dir); ok {
		b.logf("blockfs: disk cache %s: %s and %d fingerprint directories beside it are an older blockfs's disk cache: "+
			"no longer used, and never deleted by blockfs (it keeps its files in %s now); remove them to free their space",
			opt.Dir, filepath.Join(opt.Dir, oldLockName), n, sub)
	}
	return b, nil
}

// fixedSet returns the fixed set: the files of opt.Keep (or every FileID below opt.Files, in
// order) that can be cached (a checksum, one extent), taken in order while they fit in
// opt.Size together, as a bit per FileID, and their count. Without opt.Files, nil: every file.
func fixedSet(t source.Table, opt Options) ([]uint64, int64) {
	if opt.Files == 0 {
		return nil, -1
	}
	ids := opt.Keep
	if ids == nil {
		ids = make([]source.FileID, opt.Files)
		for i := range ids {
			ids[i] = source.FileID(i)
		}
	}
	set := make([]uint64, (opt.Files+63)/64)
	var used, n int64
	for _, id := range ids {
		e, ok := t.Extent(id)
		if id >= opt.Files || !ok || !e.Ident.HasCRC || len(e.Parts) > 0 {
			continue
		}
		if used+e.Size > opt.Size {
			break
		}
		used += e.Size
		set[id/64] |= 1 << (id % 64)
		n++
	}
	return set, n
}

// keeps reports whether file id is in the fixed set (every file when there is none).
func (b *Blocks) keeps(id source.FileID) bool {
	if b.kept == nil {
		return true
	}
	return id/64 < source.FileID(len(b.kept)) && b.kept[id/64]&(1<<(id%64)) != 0
}

// KeptFiles returns how many of the table's FileIDs are in the fixed set kept on disk, or -1
// when every file is kept.
func (b *Blocks) KeptFiles() int64 { return b.nkept }

// Close releases the directory's lock. Fills must have finished.
func (b *Blocks) Close() error {
	if b.claim != nil {
		b.claim.Close()
	}
	b.rootMu.Lock()
	defer b.rootMu.Unlock()
	if b.root < 0 {
		return nil
	}
	err := unix.Close(b.root)
	b.root = -1
	return err
}

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

// Size implements source.Blocks.
func (b *Blocks) Size(id source.FileID) int64 { return b.inner.Size(id) }

func (e *fillError) Error() string { return e.err.Error() }

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
