package userfile

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// openat2 is unix.Openat2; a test puts in one that fails as a kernel without it does.
var openat2 = unix.Openat2

// noOpenat2 is set once openat2 has failed as a kernel older than 5.6 (ENOSYS) or a seccomp
// filter (EPERM) makes it fail: OpenBeneath then walks every path a name at a time.
var noOpenat2 atomic.Bool

// FolderChangedError is OpenBeneath's error when a folder on the path it opens is not one: a
// symlink (to anywhere), a file, a FIFO. Where the path came from a listing, the folder was
// replaced since.
type FolderChangedError struct {
	Dir string // the folder's path under the one opened beneath, '/'-separated
	Err error  // the open's (ELOOP, ENOTDIR)
}

func (e *FolderChangedError) Error() string {
	return fmt.Sprintf("%s is not a folder: %v", e.Dir, e.Err)
}

func (e *FolderChangedError) Unwrap() error { return e.Err }

// OpenBeneath opens rel, a '/'-separated path under the folder dirfd, with flags, following
// no symlink in any of its components and never leaving dirfd: a symlink put in the place of
// a folder on the path (by anyone who can write in it) would otherwise lead the open to any
// file the caller can reach; nor is the last component followed (O_NOFOLLOW or not). It
// returns the descriptor. The errors: a *FolderChangedError when a folder on the path is not
// one; ELOOP when the last component is a symlink; else the open's (ENOTDIR for it not a
// folder when flags has O_DIRECTORY).
//
// With openat2 (Linux 5.6) the kernel resolves the path in one call (RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS). Without it, and to tell which component failed, the path is walked a
// name at a time, each folder opened relative to the one before without following a symlink.
func OpenBeneath(dirfd int, rel string, flags int) (int, error) {
	if !noOpenat2.Load() {
		// RESOLVE_NO_SYMLINKS refuses a last component that is a symlink too (ELOOP), where
		// O_NOFOLLOW with O_DIRECTORY would say ENOTDIR.
		how := unix.OpenHow{Flags: uint64(flags &^ unix.O_NOFOLLOW), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
		fd, err := retryEINTR(func() (int, error) { return openat2(dirfd, rel, &how) })
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
		case !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.EAGAIN):
			return -1, err // ENOENT, EACCES...: as the walk would say
		}
		// ELOOP, ENOTDIR: the walk says which component; EXDEV, EAGAIN: it resolves no "..".
	}
	return openWalk(dirfd, rel, flags)
}

// OpenAbsolute opens the absolute path with flags as OpenBeneath does from /: no symlink
// followed in any component (a path whose symlinks were resolved before, and that another user
// may have changed since). "/" itself opens as it is.
func OpenAbsolute(path string, flags int) (int, error) {
	rel := strings.TrimPrefix(filepath.Clean(path), "/")
	if rel == "" {
		return retryEINTR(func() (int, error) { return unix.Open("/", flags, 0) })
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	return OpenBeneath(root, rel, flags)
}

// openWalk opens rel under the folder dirfd with flags, a name at a time: each folder on the
// path with O_PATH|O_NOFOLLOW|O_DIRECTORY relative to the one before (searched, not read),
// the last with flags. "", "." and ".." are refused.
func openWalk(dirfd int, rel string, flags int) (int, error) {
	names := strings.Split(rel, "/")
	fd := dirfd
	for i, n := range names {
		if n == "" || n == "." || n == ".." {
			closeUnless(fd, dirfd)
			return -1, fmt.Errorf("%q is not a path under the folder: %w", rel, unix.EXDEV)
		}
		last := i == len(names)-1
		fl := flags | unix.O_NOFOLLOW
		if !last {
			fl = unix.O_PATH | unix.O_NOFOLLOW | unix.O_DIRECTORY | unix.O_CLOEXEC
		}
		next, err := retryEINTR(func() (int, error) { return unix.Openat(fd, n, fl, 0) })
		if err != nil && last && errors.Is(err, unix.ENOTDIR) && isSymlink(fd, n) {
			err = unix.ELOOP // as openat2 says it
		}
		closeUnless(fd, dirfd)
		// A symlink opened with O_NOFOLLOW|O_DIRECTORY is ENOTDIR, as a file or a FIFO is.
		if err != nil && !last && (errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			return -1, &FolderChangedError{Dir: strings.Join(names[:i+1], "/"), Err: err}
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// isSymlink reports whether name in the folder fd is a symlink.
func isSymlink(fd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// closeUnless closes fd unless it is keep.
func closeUnless(fd, keep int) {
	if fd != keep {
		unix.Close(fd)
	}
}

// retryEINTR calls open again while it fails with EINTR (a signal during an open on a network
// or FUSE filesystem), as package os does.
func retryEINTR(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}
