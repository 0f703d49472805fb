// Package userfile opens the small files blockfs reads because a user named them, or because a
// mount's info.json points at them: a --segments map, --labels, a mountpoint's
// .blockfs/info.json. None of them may hang or flood the reader, whoever made them:
//
//   - the open does not wait: O_NONBLOCK, so a FIFO (which would wait for a writer) opens at
//     once, and O_NOCTTY, so a terminal does not become the process's;
//   - the file is checked with fstat on the descriptor opened, not on the path before it (no
//     race with a rename): anything but a regular file (a FIFO, /dev/zero or another device,
//     a socket, a directory) is refused, saying what it is;
//   - it is read only up to a limit its caller states: a larger file is refused before a byte
//     is read, and one that grows past the limit while it is read is refused too.
//
// The descriptor is read with plain system calls (O_NONBLOCK is cleared once the file is known
// to be regular, so os.NewFile does not register it with the runtime's poller).
package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"
)

// Sentinels: every error of this package (an *fs.PathError) wraps one of them, or the errno of
// a failed open.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("larger than the limit")
)

// problem is the cause of a refusal, in words, wrapping its sentinel.
type problem struct {
	msg  string
	kind error
}

func (p *problem) Error() string { return p.msg }
func (p *problem) Unwrap() error { return p.kind }

// Open opens path for reading and returns it with its size. It refuses, with an
// *fs.PathError wrapping ErrNotRegular or ErrTooLarge, a file that is not regular or that
// holds more than limit bytes (limit < 0: no limit). Read it through Reader to hold the limit
// while it grows.
func Open(path string, limit int64) (*os.File, int64, error) {
	fd, st, err := openRegular(path, "open", unix.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	if limit >= 0 && st.Size > limit {
		unix.Close(fd)
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: tooLarge(st.Size, limit)}
	}
	return os.NewFile(uintptr(fd), path), st.Size, nil
}

// Create opens path for writing anew, as a file the user named for blockfs to write (a profile,
// a picture): truncated, or made with mode 0600. It refuses a symbolic link there (one planted
// where the file goes would have blockfs overwrite whatever it points at) and, with an
// *fs.PathError wrapping ErrNotRegular, anything but a regular file (a FIFO is not waited on).
func Create(path string) (*os.File, error) {
	fd, _, err := openRegular(path, "create", unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openRegular opens path with flags (and O_NONBLOCK, O_NOCTTY, O_CLOEXEC) and returns the
// descriptor and its fstat, refusing anything but a regular file (and, with O_NOFOLLOW, a
// symbolic link) with an *fs.PathError of op wrapping ErrNotRegular. The descriptor is left
// blocking: a regular file never blocks, and without O_NONBLOCK os.NewFile leaves the poller
// alone.
func openRegular(path, op string, flags int, perm uint32) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	flags |= unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	fd, err := retryEINTR(func() (int, error) { return unix.Open(path, flags, perm) })
	if err == unix.ELOOP && flags&unix.O_NOFOLLOW != 0 {
		return -1, st, &fs.PathError{Op: op, Path: path, Err: &problem{"a symbolic link: give the file's own path", ErrNotRegular}}
	}
	if err != nil {
		return -1, st, &fs.PathError{Op: op, Path: path, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, st, &fs.PathError{Op: op, Path: path, Err: &problem{KindOf(st.Mode) + ", not a regular file", ErrNotRegular}}
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return fd, st, nil
}

// ReadFile reads the regular file at path whole, refusing it as Open does when it is not
// regular or holds more than limit bytes (then or while it is read).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, size, err := Open(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, 0, size+1) // one byte more tells a file that grew
	r := Reader(f, limit)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Reader returns a reader of f (from its current offset) that fails with an *fs.PathError
// wrapping ErrTooLarge once more than limit bytes have come (limit < 0: no limit): for a file
// that grows while it is read.
func Reader(f *os.File, limit int64) io.Reader {
	if limit < 0 {
		return f
	}
	return &limited{f: f, limit: limit}
}

type limited struct {
	f     *os.File
	limit int64
	read  int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.read > l.limit {
		return 0, l.grew()
	}
	if left := l.limit - l.read; int64(len(p)) > left+1 {
		p = p[:left+1] // one byte past the limit tells a file that grew
	}
	n, err := l.f.Read(p)
	if l.read += int64(n); l.read > l.limit {
		return 0, l.grew()
	}
	return n, err
}

func (l *limited) grew() error {
	return &fs.PathError{Op: "read", Path: l.f.Name(), Err: &problem{fmt.Sprintf("grew past the limit of %s while it was read", ibytes(l.limit)), ErrTooLarge}}
}

func tooLarge(size, limit int64) error {
	return &problem{fmt.Sprintf("%s, more than the limit of %s", ibytes(size), ibytes(limit)), ErrTooLarge}
}

// KindOf names a file's type (st_mode) as a user knows it, for messages.
func KindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFIFO:
		return "a named pipe (FIFO)"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFDIR:
		return "a directory"
	}
	return "a special file"
}

func ibytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	return humanize.IBytes(uint64(n))
}

// Within reports whether path is dir or lies below it. Both are taken as they are (resolve
// symlinks first where a link could lead elsewhere); a relative path is compared with a
// relative dir only.
func Within(dir, path string) bool {
	r, err := filepath.Rel(dir, path)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
}

// PathCause returns the cause of an *fs.PathError (its errno), for a message that names the
// path itself; err as it is otherwise.
func PathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
