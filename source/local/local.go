// Package local reads a dataset's files from a local filesystem: source.Blocks over a
// source.Table whose names are paths. Reads are positional (preadv), with O_DIRECT where it is
// turned on and the request's offsets and buffers allow it.
package local

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/odirect"
	"github.com/blockfs/blockfs/source"
)

// Files implements source.Blocks over the local files a table names. Safe for concurrent use.
type Files struct {
	t source.Table // immutable after New

	// streams, when set, names the files read with O_DIRECT; the others are read buffered,
	// so the kernel's page cache keeps them (a mount's resident set). Immutable after New.
	streams func(source.FileID) bool

	// direct, when set, reads with O_DIRECT where the request allows it; cleared for good if
	// the filesystem refuses it.
	direct atomic.Bool
}

// New returns the files of t. With direct set, reads whose offset and buffers are aligned to
// 4096 bytes (the cache's pages are) go from the disk to the caller's buffers with O_DIRECT,
// around the kernel's page cache; other reads, and every read on a filesystem without
// O_DIRECT, are buffered.
func New(t source.Table, direct bool) *Files {
	f := &Files{t: t}
	f.direct.Store(direct)
	return f
}

// NewStreaming returns the files of t, reading those that streams names with O_DIRECT (as New
// with direct set) and the others buffered: a mount keeps a fixed set of blocks resident in
// the kernel's page cache across epochs and streams the rest around it, so the page cache
// never holds more than the resident set of block files (memory.Plan.Streams).
func NewStreaming(t source.Table, streams func(source.FileID) bool) *Files {
	f := New(t, true)
	f.streams = streams
	return f
}

// Direct reports whether O_DIRECT is in use (it is dropped if the filesystem refuses it).
func (f *Files) Direct() bool { return f.direct.Load() }

// Size implements source.Blocks.
func (f *Files) Size(id source.FileID) int64 { return source.TableSize(f.t, id) }

// Fill implements source.Blocks. Errors are *source.Error wrapping the cause: the errno of a
// failed open or read (ENOENT for a file that is gone, EMFILE, EIO), or source.ErrShort for a
// file that ends before the table says. Every read is served alike: how is not used.
func (f *Files) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	return source.FillTable(ctx, f.t, id, off, bufs, func(name string) string { return name },
		func(e source.Extent, off int64, bufs [][]byte) error {
			return f.fill(e, off, bufs, f.streams == nil || f.streams(id))
		})
}

// fill reads bufs from off of the single file e, with O_DIRECT where direct allows it.
func (f *Files) fill(e source.Extent, off int64, bufs [][]byte, direct bool) error {
	off += e.Offset
	var iov [][]byte
	if direct && f.direct.Load() {
		iov, _ = odirect.IOVecs(bufs, off) // nil: the request does not qualify
	}
	fd, isDirect, refused, err := odirect.Open(iov != nil, func(flags int) (int, error) { return open(e, flags) })
	if refused {
		f.direct.Store(false) // this filesystem has no O_DIRECT
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if isDirect {
		done, err := readDirect(fd, e, iov, bufs, off)
		if done || err != nil {
			return err
		}
		// The filesystem took the open but refuses the request: read it buffered.
		if err := odirect.Clear(uintptr(fd), e.Name); err != nil {
			return &source.Error{Op: "read", Name: e.Name, Off: off, Err: err}
		}
	}
	if err := preadFull(fd, e.Name, bufs, off); err != nil {
		return err
	}
	if direct && f.streams != nil {
		// A streamed file that O_DIRECT could not read (a range off the 4 KiB grid, as in a
		// .npy served in place, or a filesystem without O_DIRECT): drop the pages the read
		// brought into the kernel's page cache, so that only the resident set stays there.
		// Pages shared with a neighbouring range are kept (the kernel drops whole pages only).
		_ = unix.Fadvise(fd, off, int64(source.Len(bufs)), unix.FADV_DONTNEED)
	}
	return check(fd, e) // rewritten in place while it was read?
}

// open opens e's file read-only and checks that it is still the file the dataset opened. It
// follows no symlink in the last component and never blocks (a FIFO put in the file's place
// opens at once, and fails the check).
func open(e source.Extent, flags int) (int, error) {
	for {
		fd, err := unix.Open(e.Name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK|flags, 0)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ELOOP {
			err = fmt.Errorf("%w: it is now a symbolic link", source.ErrChanged)
		}
		if err != nil {
			return -1, &source.Error{Op: "open", Name: e.Name, Off: -1, Err: err}
		}
		if err := check(fd, e); err != nil {
			unix.Close(fd)
			return -1, err
		}
		return fd, nil
	}
}

// check compares the open file fd with the identity e recorded when the dataset opened.
func check(fd int, e source.Extent) error {
	if e.Ident == (source.Identity{}) {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &source.Error{Op: "stat", Name: e.Name, Off: -1, Err: err}
	}
	var what string
	id := e.Ident
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		what = fmt.Sprintf("it is no longer a regular file (mode %#o)", st.Mode&unix.S_IFMT)
	case uint64(st.Dev) != id.Dev || st.Ino != id.Ino:
		what = fmt.Sprintf("another file is in its place (inode %d, was %d): replaced or re-packed", st.Ino, id.Ino)
	case st.Size != id.Size:
		what = fmt.Sprintf("its size is %d bytes, was %d", st.Size, id.Size)
	case st.Mtim.Nano() != id.MtimeNs:
		what = "it was modified (its modification time changed)"
	default:
		return nil
	}
	return &source.Error{Op: "open", Name: e.Name, Off: -1, Err: fmt.Errorf("%w: %s", source.ErrChanged, what)}
}

// preadFull fills bufs from fd at off with as many preadv calls as it takes; a file that ends
// first is source.ErrShort, never a short read.
func preadFull(fd int, path string, bufs [][]byte, off int64) error {
	want := source.Len(bufs)
	for got := 0; got < want; {
		n, err := unix.Preadv(fd, skipBufs(bufs, got), off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &source.Error{Op: "read", Name: path, Off: off + int64(got), Err: err}
		}
		if n == 0 {
			return &source.Error{Op: "read", Name: path, Off: off + int64(got), Err: source.ErrShort}
		}
		got += n
	}
	return nil
}

// readDirect reads bufs at off from fd, open with O_DIRECT, through iov (odirect.IOVecs of
// bufs). It reports done=false, with no error, when the filesystem refuses the first request
// (EINVAL), and the caller reads buffered.
func readDirect(fd int, e source.Extent, iov, bufs [][]byte, off int64) (bool, error) {
	want := source.Len(bufs)
	for got := 0; got < want; {
		n, err := unix.Preadv(fd, skipBufs(iov, got), off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err == unix.EINVAL && got == 0 {
			return false, nil
		}
		if err != nil {
			return true, &source.Error{Op: "read", Name: e.Name, Off: off + int64(got), Err: err}
		}
		if n == 0 {
			return true, &source.Error{Op: "read", Name: e.Name, Off: off + int64(got), Err: source.ErrShort}
		}
		got += n
		if got%odirect.Align != 0 && got < want {
			// A short read that breaks alignment before the end: finish without O_DIRECT.
			if err := odirect.Clear(uintptr(fd), e.Name); err != nil {
				return true, &source.Error{Op: "read", Name: e.Name, Off: off + int64(got), Err: err}
			}
			if err := preadFull(fd, e.Name, skipBufs(bufs, got), off+int64(got)); err != nil {
				return true, err
			}
			break
		}
	}
	return true, check(fd, e)
}

// skipBufs returns the iovecs of bufs after the first n bytes.
func skipBufs(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if n == 0 || len(bufs) == 0 {
		return bufs
	}
	out := make([][]byte, len(bufs))
	copy(out, bufs)
	out[0] = out[0][n:]
	return out
}

// Uncache asks the kernel to drop the pages of t's files ids from its page cache
// (POSIX_FADV_DONTNEED), best effort: a mount that stops keeping a block resident gives its
// pages back at once rather than when memory runs short. A file that cannot be opened is
// skipped.
func Uncache(t source.Table, ids ...source.FileID) {
	for _, id := range ids {
		e, ok := t.Extent(id)
		if !ok || e.Parts != nil {
			continue
		}
		fd, err := open(e, 0)
		if err != nil {
			continue
		}
		_ = unix.Fadvise(fd, e.Offset, e.Size, unix.FADV_DONTNEED)
		unix.Close(fd)
	}
}
