package diskcache

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment O_DIRECT needs of buffers, lengths and file offsets here.
const directAlign = 4096

// directFile is a copy read or written with O_DIRECT while each request qualifies (the
// buffer's address and length and the file offset multiples of directAlign), and through the
// page cache from the first one that does not (a file's tail) or that the filesystem refuses:
// O_DIRECT is then cleared on the descriptor for good. Copies are written with O_DIRECT, from
// the cache's pages to the disk with no copy through the kernel's page cache, which on a
// machine the store shares is memory bandwidth taken from the first epoch (see
// docs/PERFORMANCE.md); they are read with it when Options.Direct says so.
type directFile struct {
	f       *os.File // not embedded: its ReadFrom and WriteTo would go around the alignment checks
	direct  bool     // O_DIRECT is set on the descriptor
	refused bool     // the filesystem refused O_DIRECT (at open, or a request)
}

// openFile opens path with flag (and mode 0644 if it creates it), adding O_DIRECT when
// direct is set and the filesystem allows it.
func openFile(path string, flag int, direct bool) (*directFile, error) {
	refused := false
	if direct {
		f, err := os.OpenFile(path, flag|unix.O_DIRECT, 0o644)
		if err == nil {
			return &directFile{f: f, direct: true}, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			return nil, err
		}
		refused = true // no O_DIRECT on this filesystem
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	return &directFile{f: f, refused: refused}, nil
}

// createTemp creates (truncating) the file a copy is written to, with O_DIRECT where the
// filesystem allows it.
func createTemp(path string) (*directFile, error) {
	return openFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, true)
}

// Write writes p at the file's offset. A copy is written from its start, in order, so the
// offset stays aligned while every write before was.
func (d *directFile) Write(p []byte) (int, error) {
	return d.do(aligned(p), func() (int, error) { return d.f.Write(p) })
}

// ReadAt reads len(p) bytes at off.
func (d *directFile) ReadAt(p []byte, off int64) (int, error) {
	return d.do(aligned(p) && off%directAlign == 0, func() (int, error) { return d.f.ReadAt(p, off) })
}

// do runs op with O_DIRECT if the request qualifies (ok), and buffered otherwise, or when the
// filesystem took the open but refuses the request (a stricter alignment).
func (d *directFile) do(ok bool, op func() (int, error)) (int, error) {
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

// buffered clears O_DIRECT on the file: the requests after it go through the page cache.
func (d *directFile) buffered() error {
	fd := d.f.Fd()
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	if err != nil {
		return &os.PathError{Op: "fcntl", Path: d.f.Name(), Err: err}
	}
	d.direct = false
	return nil
}

// Stat returns the file's FileInfo.
func (d *directFile) Stat() (os.FileInfo, error) { return d.f.Stat() }

// Close closes the file.
func (d *directFile) Close() error { return d.f.Close() }

// aligned reports whether p's address and length are multiples of directAlign.
func aligned(p []byte) bool {
	return len(p)%directAlign == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(p)))%directAlign == 0
}

// alignedBuf returns a buffer of n bytes whose address is a multiple of directAlign.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	k := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % directAlign)
	if k != 0 {
		k = directAlign - k
	}
	return b[k : k+n : k+n]
}
