package fs

import (
	"context"
	"errors"
	"io"
	"log"
	"syscall"

	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/view"
)

// toErrno turns an error from the view into the errno a reader sees, and logs what happened
// (what names the request). A reader gets an error, never zeros or a silent short read:
//
//   - end of file: no error;
//   - the request was interrupted (its context ended): EINTR, not logged;
//   - the daemon is out of file descriptors (EMFILE, ENFILE) or memory (ENOMEM): that errno,
//     logged with what to do;
//   - a dataset file replaced, rewritten or turned into a link or special file since the mount
//     opened it: EIO, logged with what changed;
//   - corrupt data (a bad checksum, a file shorter than the manifest says, a file outside the
//     dataset, an object whose CRC32C does not match twice): EIO, logged as corruption; a file
//     or object gone: EIO;
//   - an object store that did not answer within its retry budget (unreachable, timing out,
//     5xx, throttling, resets): EIO, logged as such; the next read tries again;
//   - an I/O error from the disk (EIO) or anything else: EIO, logged with its cause.
func toErrno(err error, what string) syscall.Errno {
	errno, _, why := classify(err)
	if why != "" {
		log.Printf("blockfs: %s: %s: %v", what, why, err)
	}
	return errno
}

// classify maps err to an errno, its kind (one of ErrorKinds, "" for none: no error) and the
// words a log line gives for it ("" for no log line).
func classify(err error) (errno syscall.Errno, kind, why string) {
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return 0, "", ""
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR, "interrupted", ""
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return syscall.EMFILE, "fds", "out of file descriptors (raise the daemon's limit: ulimit -n)"
	case errors.Is(err, syscall.ENOMEM):
		return syscall.ENOMEM, "memory", "out of memory"
	case errors.Is(err, source.ErrChanged):
		return syscall.EIO, "changed", "a dataset file changed under the mount (the mount serves the version it opened, or nothing; remount to serve the new one)"
	case errors.Is(err, source.ErrDenied):
		return syscall.EIO, "denied", "the object store refused access (credentials expired or changed? remount with valid ones)"
	case errors.Is(err, source.ErrUnavailable):
		return syscall.EIO, "unavailable", "object store unavailable after retries (the read fails; later reads try again)"
	case view.Corrupt(err):
		return syscall.EIO, "corrupt", "corrupt dataset"
	case view.Gone(err):
		return syscall.EIO, "gone", "a dataset file is gone (changed under the mount? remount it)"
	case errors.Is(err, syscall.ENOENT):
		return syscall.ENOENT, "missing", ""
	case errors.Is(err, syscall.EIO):
		return syscall.EIO, "disk", "I/O error from the disk"
	}
	return syscall.EIO, "other", "error"
}
