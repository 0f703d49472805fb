// Package local reads a dataset's files from a local filesystem: source.Blocks over a
// source.Table whose names are paths. Reads are positional (preadv), with O_DIRECT where it is
// turned on and the request's offsets and buffers allow it.
package local

import (
	"context"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/source"
)

// Files implements source.Blocks over the local files a table names. Safe for concurrent use.
type Files struct {
	t source.Table // immutable after New

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

// Direct reports whether O_DIRECT is in use (it is dropped if the filesystem refuses it).
func (f *Files) Direct() bool { return f.direct.Load() }

// Size implements source.Blocks.
func (f *Files) Size(id source.FileID) int64 {
	e, _ := f.t.Extent(id)
	return e.Size
}

// Fill implements source.Blocks. Errors are *source.Error wrapping the cause: the errno of a
// failed open or read (ENOENT for a file that is gone, EMFILE, EIO), or source.ErrShort for a
// file that ends before the table says.
func (f *Files) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e, ok := f.t.Extent(id)
	n := int64(source.Len(bufs))
	if !ok || off < 0 || off+n > e.Size {
		return &source.Error{Op: "read", Name: e.Name, Off: off, Err: source.ErrNoFile}
	}
	if n == 0 {
		return nil
	}
	off += e.Offset
	if f.direct.Load() {
		done, err := f.readDirect(e.Name, bufs, off)
		if done || err != nil {
			return err
		}
	}
	fd, err := open(e.Name, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return preadFull(fd, e.Name, bufs, off)
}

// open opens path read-only, retrying EINTR.
func open(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|flags, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &source.Error{Op: "open", Name: path, Off: -1, Err: err}
		}
		return fd, nil
	}
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

// directAlign is the alignment O_DIRECT needs of offsets, lengths and buffers here.
const directAlign = 4096

// readDirect tries an O_DIRECT read of bufs at off. It reports done=false, with no error, when
// the request does not qualify (alignment) or the filesystem refuses O_DIRECT, and the caller
// reads as usual. The last buffer may be short (a file's tail): its capacity must then reach
// the next alignment boundary, which is read into and ignored.
func (f *Files) readDirect(path string, bufs [][]byte, off int64) (bool, error) {
	if off%directAlign != 0 {
		return false, nil
	}
	iov := make([][]byte, len(bufs))
	want := 0
	for i, b := range bufs {
		if len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%directAlign != 0 {
			return false, nil
		}
		n := len(b)
		if n%directAlign != 0 {
			up := (n + directAlign - 1) / directAlign * directAlign
			if i != len(bufs)-1 || cap(b) < up {
				return false, nil
			}
			n = up
		}
		iov[i] = b[:n]
		want += len(b)
	}
	fd, err := open(path, unix.O_DIRECT)
	if se, ok := err.(*source.Error); ok && se.Err == unix.EINVAL {
		f.direct.Store(false) // this filesystem has no O_DIRECT
		return false, nil
	}
	if err != nil {
		return true, err
	}
	defer unix.Close(fd)
	for got := 0; got < want; {
		n, err := unix.Preadv(fd, skipBufs(iov, got), off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err == unix.EINVAL && got == 0 {
			return false, nil
		}
		if err != nil {
			return true, &source.Error{Op: "read", Name: path, Off: off + int64(got), Err: err}
		}
		if n == 0 {
			return true, &source.Error{Op: "read", Name: path, Off: off + int64(got), Err: source.ErrShort}
		}
		got += n
		if got%directAlign != 0 && got < want {
			// A short read that breaks alignment before the end: finish without O_DIRECT.
			bfd, err := open(path, 0)
			if err != nil {
				return true, err
			}
			defer unix.Close(bfd)
			return true, preadFull(bfd, path, skipBufs(bufs, got), off+int64(got))
		}
	}
	return true, nil
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
