package fs

import (
	"context"
	"errors"
	"io"
	"log"
	"syscall"
)

// toErrno turns an error from the view into the errno a reader sees. Everything that is not an
// end of file or a cancellation is logged and becomes EIO: a reader gets an error, never zeros
// or a silent short read.
func toErrno(err error, what string) syscall.Errno {
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return 0
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno == syscall.ENOENT {
		return syscall.ENOENT
	}
	log.Printf("blockfs: %s: %v", what, err)
	return syscall.EIO
}
