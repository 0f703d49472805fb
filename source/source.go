// Package source is the seam below the page cache: where a dataset's bytes come from. The cache
// reads whole pages through Blocks and knows nothing of paths, directories or object keys; a
// backend (local files in package source/local, an object store next) implements Blocks over
// a Table of extents that package layout builds when a dataset opens.
package source

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// FileID names one file of a dataset (layout.DataFile and friends make them); it is the cache's
// key.
type FileID uint64

// Blocks is a fixed set of immutable files of known size. Implementations are safe for
// concurrent use.
type Blocks interface {
	// Size returns the length of file id in bytes; 0 for a file the dataset does not have.
	Size(id FileID) int64
	// Fill reads the bytes of file id from off into bufs, in order, filling every one, or
	// returns an error: never a short read. A request past the end of the file is an error.
	// A buf's capacity may reach past its length up to a 4096-byte boundary, and a backend may
	// read into that tail (direct I/O of a file's last page). ctx bounds the wait: a backend
	// checks it before it starts and, where it can, while it waits. how says who waits for the
	// read and who checks its bytes (Read); a layer over another Blocks passes it on.
	Fill(ctx context.Context, id FileID, off int64, bufs [][]byte, how Read) error
}

// Extent is where a file's bytes are: Size bytes from Offset of the object Name (a path, or an
// object key). A file served in place is a range of a larger file. Ident is what the object was
// when the dataset opened: a backend refuses to read an object that no longer matches it.
type Extent struct {
	Name   string
	Offset int64
	Size   int64
	Ident  Identity
	// Parts, when set, makes the file the concatenation of these extents (a window of rows that
	// runs across two block files); Name, Offset and Ident are then unused.
	Parts []Extent
}

// Identity is what an object was when a dataset opened, so that a mount serves that version or
// nothing (ErrChanged). The zero Identity checks nothing.
type Identity struct {
	Dev, Ino uint64 // a local file's device and inode
	Size     int64  // the whole object's size
	MtimeNs  int64  // a local file's modification time, in nanoseconds
	Tag      string // an object store's ETag
	// CRC32C is the whole object's checksum from the manifest, when HasCRC: a backend that
	// fetches whole objects (source/s3) checks it before any byte reaches the cache.
	CRC32C uint32
	HasCRC bool
}

// Table maps the files of a dataset to their extents. layout.Dataset implements it.
type Table interface {
	// Extent returns where file id's bytes are, and false for a file the dataset does not have.
	Extent(id FileID) (Extent, bool)
}

// Errors a backend wraps (in an *Error) besides the operating system's own (syscall.Errno).
var (
	// ErrShort: a file ended before the bytes the dataset says it has (truncated or replaced).
	ErrShort = errors.New("file is shorter than the dataset says (truncated or replaced?)")
	// ErrNoFile: a FileID the dataset does not have, or a range outside the file (a bug in
	// the caller, never the data's fault).
	ErrNoFile = errors.New("no such file or range in the dataset")
	// ErrChanged: the object is not the one the dataset opened (replaced, rewritten, resized,
	// turned into a link or a special file); the error says what changed.
	ErrChanged = errors.New("changed since the dataset was opened")
	// ErrCorrupt: the bytes read do not match the dataset's checksum (damaged at rest or in
	// transit); none of them is served.
	ErrCorrupt = errors.New("bytes do not match the dataset's CRC32C")
	// ErrUnavailable: the store did not answer (unreachable, timing out, failing) within the
	// backend's retry budget; a later read tries again.
	ErrUnavailable = errors.New("store unavailable")
	// ErrDenied: the store refused the request (wrong or expired credentials, no permission);
	// retrying does not help until the credentials change.
	ErrDenied = errors.New("the store refused access")
	// ErrNotTried: a read nobody waited for yet (Read.Ahead) that the backend gave up without a
	// request, the store having answered nothing for its budget; wrapped with ErrUnavailable.
	// It says nothing of the store now: the cache asks once more, as a reader's, when a reader
	// has come to wait for the load meanwhile (Ahead.Promote).
	ErrNotTried = errors.New("readahead not tried")
)

// Error is a failed operation on one file of a source. Err is the cause: an errno (EMFILE, EIO,
// ENOENT), ErrShort, ErrNoFile, ErrChanged, or a context's error; errors.Is sees through to it.
type Error struct {
	Op   string // "open", "read"
	Name string // the file's path or key
	Off  int64  // the offset in Name where the operation failed (-1 for open)
	Err  error
}

func (e *Error) Error() string {
	if e.Off < 0 {
		return fmt.Sprintf("%s %s: %v", e.Op, e.Name, e.Err)
	}
	return fmt.Sprintf("%s %s at offset %d: %v", e.Op, e.Name, e.Off, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Len returns the bytes bufs hold.
func Len(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// SliceBufs returns the iovecs of bytes [from, to) of bufs, sharing their memory, with no
// spare capacity (a read into one must not run into the next).
func SliceBufs(bufs [][]byte, from, to int64) [][]byte {
	var out [][]byte
	at := int64(0)
	for _, b := range bufs {
		lo, hi := max(from-at, 0), min(to-at, int64(len(b)))
		if lo < hi {
			out = append(out, b[lo:hi:hi])
		}
		at += int64(len(b))
		if at >= to {
			break
		}
	}
	return out
}

// TableSize returns the size of file id in t: a Size for a backend over a Table; 0 for a file
// t does not have.
func TableSize(t Table, id FileID) int64 {
	e, _ := t.Extent(id)
	return e.Size
}

// FillTable is a Fill for a backend over a Table: it returns ctx's error if ctx has ended, an
// *Error wrapping ErrNoFile for a file t does not have or a range outside it (naming the
// object as name says), nil for an empty read, and otherwise fills bufs from off of file id's
// extent with fill, one single extent at a time (FillExtent).
func FillTable(ctx context.Context, t Table, id FileID, off int64, bufs [][]byte, name func(string) string,
	fill func(e Extent, off int64, bufs [][]byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e, ok := t.Extent(id)
	n := int64(Len(bufs))
	if !ok || off < 0 || off+n > e.Size {
		return &Error{Op: "read", Name: name(e.Name), Off: off, Err: ErrNoFile}
	}
	if n == 0 {
		return nil
	}
	return FillExtent(e, off, bufs, fill)
}

// FillExtent fills bufs from off of e with fill, which reads one single extent: e itself, or,
// for a file made of parts (Extent.Parts), each part the bytes touch, with its offset in that
// part and its share of bufs. It stops at fill's first error.
func FillExtent(e Extent, off int64, bufs [][]byte, fill func(e Extent, off int64, bufs [][]byte) error) error {
	if len(e.Parts) == 0 {
		return fill(e, off, bufs)
	}
	done, want := int64(0), int64(Len(bufs))
	for _, p := range e.Parts {
		if done == want {
			break
		}
		if off >= p.Size {
			off -= p.Size
			continue
		}
		k := min(p.Size-off, want-done)
		if err := fill(p, off, SliceBufs(bufs, done, done+k)); err != nil {
			return err
		}
		done += k
		off = 0
	}
	return nil
}

// NamespaceShift is where a namespace's bits start in a FileID (see Mux).
const NamespaceShift = 48

// Mux is the Blocks of several sources under one cache (a mixture): FileID id of source i is
// id | i<<NamespaceShift, as cache.Cache.Namespace makes them. It counts the reads and bytes
// of each source. Safe for concurrent use.
type Mux struct {
	parts []Blocks
	reads []atomic.Uint64
	bytes []atomic.Uint64
}

// NewMux returns the Blocks of parts, part i in namespace i.
func NewMux(parts []Blocks) *Mux {
	return &Mux{parts: parts, reads: make([]atomic.Uint64, len(parts)), bytes: make([]atomic.Uint64, len(parts))}
}

func (m *Mux) route(id FileID) (int, FileID, bool) {
	i := int(id >> NamespaceShift)
	if i >= len(m.parts) {
		return 0, 0, false
	}
	return i, id & (1<<NamespaceShift - 1), true
}

// Size returns the size of file id of its source; 0 for a source there is not.
func (m *Mux) Size(id FileID) int64 {
	i, inner, ok := m.route(id)
	if !ok {
		return 0
	}
	return m.parts[i].Size(inner)
}

// Fill reads file id of its source.
func (m *Mux) Fill(ctx context.Context, id FileID, off int64, bufs [][]byte, how Read) error {
	i, inner, ok := m.route(id)
	if !ok {
		return &Error{Op: "read", Name: fmt.Sprintf("source %d", id>>NamespaceShift), Off: off, Err: ErrNoFile}
	}
	err := m.parts[i].Fill(ctx, inner, off, bufs, how)
	if err == nil {
		m.reads[i].Add(1)
		m.bytes[i].Add(uint64(Len(bufs)))
	}
	return err
}

// Read returns the reads and bytes that source i has given the cache.
func (m *Mux) Read(i int) (reads, bytes uint64) { return m.reads[i].Load(), m.bytes[i].Load() }
