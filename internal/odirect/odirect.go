// Package odirect is blockfs's one O_DIRECT helper: the alignment a request needs, aligned
// buffers, an open that falls back to buffered I/O where the filesystem refuses O_DIRECT, and
// File, which reads and writes with O_DIRECT while each request qualifies. source/local reads
// dataset files with it; source/diskcache reads and writes its copies with it.
package odirect

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Align is the alignment O_DIRECT needs of buffers, lengths and file offsets here.
const Align = 4096

// Aligned reports whether p's address and length are multiples of Align.
func Aligned(p []byte) bool {
	return len(p)%Align == 0 && addrAligned(p)
}

func addrAligned(p []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(p)))%Align == 0
}

// AlignedBuf returns a buffer of n bytes whose address is a multiple of Align.
func AlignedBuf(n int) []byte {
	b := make([]byte, n+Align)
	k := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % Align)
	if k != 0 {
		k = Align - k
	}
	return b[k : k+n : k+n]
}

// IOVecs returns the iovecs for an O_DIRECT read of bufs at off, or false when the request
// does not qualify: off and every buffer's address must be aligned, and every length but the
// last one's. The last buffer may be short (a file's tail): its capacity must then reach the
// next alignment boundary, and its iovec runs to it (the bytes past its length are read into
// and ignored).
func IOVecs(bufs [][]byte, off int64) ([][]byte, bool) {
	if off%Align != 0 {
		return nil, false
	}
	iov := make([][]byte, len(bufs))
	for i, b := range bufs {
		if len(b) == 0 || !addrAligned(b) {
			return nil, false
		}
		n := len(b)
		if n%Align != 0 {
			up := (n + Align - 1) / Align * Align
			if i != len(bufs)-1 || cap(b) < up {
				return nil, false
			}
			n = up
		}
		iov[i] = b[:n]
	}
	return iov, true
}

// Open opens a file with open(flags), adding O_DIRECT to flags when want is set. When the
// filesystem refuses O_DIRECT (EINVAL at open), it opens the file again without it and reports
// refused. direct reports whether the file is open with O_DIRECT.
func Open[F any](want bool, open func(flags int) (F, error)) (f F, direct, refused bool, err error) {
	if want {
		f, err = open(unix.O_DIRECT)
		if err == nil {
			return f, true, false, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			return f, false, false, err
		}
		refused = true // no O_DIRECT on this filesystem
	}
	f, err = open(0)
	return f, false, refused, err
}

// Clear clears O_DIRECT on the open descriptor fd of the file name: the requests after it go
// through the page cache.
func Clear(fd uintptr, name string) error {
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	if err != nil {
		return &os.PathError{Op: "fcntl", Path: name, Err: err}
	}
	return nil
}

// File is a file read or written with O_DIRECT while each request qualifies (the buffer's
// address and length and the file offset multiples of Align), and through the page cache from
// the first one that does not (a file's tail) or that the filesystem refuses: O_DIRECT is then
// cleared on the descriptor for good. Not safe for concurrent use.
type File struct {
	f       *os.File // not embedded: its ReadFrom and WriteTo would go around the alignment checks
	direct  bool     // O_DIRECT is set on the descriptor
	refused bool     // the filesystem refused O_DIRECT (at open, or a request)
}

// OpenWith opens a file with the open done by the caller (an openat in a directory it holds
// open, with flags and a mode of its own): open is called with the flags to add, O_DIRECT
// first when direct is set, then 0 if the filesystem refused it (EINVAL).
func OpenWith(direct bool, open func(extra int) (*os.File, error)) (*File, error) {
	f, direct, refused, err := Open(direct, open)
	if err != nil {
		return nil, err
	}
	return &File{f: f, direct: direct, refused: refused}, nil
}

// Direct reports whether O_DIRECT is set on the descriptor now.
func (d *File) Direct() bool { return d.direct }

// Refused reports whether the filesystem refused O_DIRECT, at open or for a request.
func (d *File) Refused() bool { return d.refused }

// Write writes p at the file's offset. A file written from its start, in order, keeps its
// offset aligned while every write before was.
func (d *File) Write(p []byte) (int, error) {
	return d.do(Aligned(p), func() (int, error) { return d.f.Write(p) })
}

// ReadAt reads len(p) bytes at off.
func (d *File) ReadAt(p []byte, off int64) (int, error) {
	return d.do(Aligned(p) && off%Align == 0, func() (int, error) { return d.f.ReadAt(p, off) })
}

// do runs op with O_DIRECT if the request qualifies (ok), and buffered otherwise, or when the
// filesystem took the open but refuses the request (a stricter alignment).
func (d *File) do(ok bool, op func() (int, error)) (int, error) {
	if d.direct && !ok {
		if err := d.buffered(); err != nil {
			return 0, err
		}
	}
	n, err := op()
	if d.direct && n == 0 && errors.Is(err, unix.EINVAL) {
		d.refused = true
		if err := d.buffered(); err != nil {
			return 0, err
		}
		return op()
	}
	return n, err
}

// buffered clears O_DIRECT on the file.
func (d *File) buffered() error {
	if err := Clear(d.f.Fd(), d.f.Name()); err != nil {
		return err
	}
	d.direct = false
	return nil
}

// Stat returns the file's FileInfo.
func (d *File) Stat() (os.FileInfo, error) { return d.f.Stat() }

// Close closes the file.
func (d *File) Close() error { return d.f.Close() }
