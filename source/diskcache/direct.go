package diskcache

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment O_DIRECT needs of buffers, lengths and file offsets here.
const directAlign = 4096

// createTemp creates (truncating) the file a copy is written to, with O_DIRECT when the
// filesystem allows it: the copy of a block goes from the cache's pages to the disk with no
// copy through the kernel's page cache, which on a machine the store shares is memory
// bandwidth taken from the first epoch (see docs/PERFORMANCE.md).
func createTemp(path string) (*directWriter, error) {
	const flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	f, err := os.OpenFile(path, flags|unix.O_DIRECT, 0o644)
	if errors.Is(err, unix.EINVAL) { // no O_DIRECT on this filesystem
		f, err = os.OpenFile(path, flags, 0o644)
		if err != nil {
			return nil, err
		}
		return &directWriter{f: f}, nil
	}
	if err != nil {
		return nil, err
	}
	return &directWriter{f: f, direct: true}, nil
}

// directWriter writes a file from its start, in order: with O_DIRECT while every write is
// aligned (address and length multiples of directAlign, so the file offset stays aligned),
// then buffered from the first write that is not (a file's tail, or a buffer of the Go heap).
type directWriter struct {
	f      *os.File
	direct bool // O_DIRECT is set on f
}

func (w *directWriter) Write(p []byte) (int, error) {
	if w.direct && !aligned(p) {
		if err := w.buffered(); err != nil {
			return 0, err
		}
	}
	n, err := w.f.Write(p)
	if w.direct && n == 0 && errors.Is(err, unix.EINVAL) {
		// The filesystem took the open but not the write (a stricter alignment): buffered.
		if err := w.buffered(); err != nil {
			return 0, err
		}
		return w.f.Write(p)
	}
	return n, err
}

// buffered clears O_DIRECT on the file: the writes after it go through the page cache.
func (w *directWriter) buffered() error {
	fd := int(w.f.Fd())
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	if err != nil {
		return &os.PathError{Op: "fcntl", Path: w.f.Name(), Err: err}
	}
	w.direct = false
	return nil
}

// Close closes the file.
func (w *directWriter) Close() error { return w.f.Close() }

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
