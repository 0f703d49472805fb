package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/internal/fuseread"
	"github.com/blockfs/blockfs/internal/mountinfo"
	"github.com/blockfs/blockfs/internal/userfile"
)

// CheckMountpoint requires an existing, empty directory that is not already a mount point and
// is not inside data (the dataset's directory, or the file it serves in place). It returns its
// absolute path and the directory, opened: the checks look at it through that descriptor,
// reached without following a symbolic link once the path is resolved, and a mount as root is
// made through it (fs.Options.MountDir), so the mount lands on the directory checked even if a
// component of the path is swapped for a symbolic link meanwhile. The caller closes it. A
// mount point /dev/fd/N (bfs.FuseFD) is instead a /dev/fuse descriptor a parent has mounted
// (checkFuseFD); it is returned as it is, with no directory.
//
// It asks the mount table before it touches mnt (resolveMountpoint): a stat of a mount whose
// daemon does not answer (stopped, hung) would wait for it, so mounting there again must be
// refused from /proc/self/mountinfo alone.
func CheckMountpoint(mnt, data string) (string, *os.File, error) {
	if fd := bfs.FuseFD(mnt); fd >= 0 {
		return mnt, nil, checkFuseFD(mnt, fd)
	}
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return "", nil, err
	}
	real, err := resolveMountpoint(abs)
	if errors.Is(err, errMounted) {
		if stale(real) {
			return "", nil, fmt.Errorf("mount point %s is a stale mount (clear it with 'blockfs unmount %s')", mnt, mnt)
		}
		return "", nil, fmt.Errorf("%s is already a mount point (unmount it first: blockfs unmount %s)", mnt, mnt)
	}
	var dir *os.File
	if err == nil {
		dir, err = openDir(real)
	}
	if err != nil {
		switch {
		case os.IsNotExist(err):
			return "", nil, fmt.Errorf("mount point %s does not exist (create it with mkdir)", mnt)
		case errors.As(err, new(*userfile.FolderChangedError)), errors.Is(err, syscall.ELOOP):
			return "", nil, fmt.Errorf("mount point %s changed while it was checked (a part of its path became a symbolic link); mount again", mnt)
		case errors.Is(err, syscall.ENOTDIR):
			return "", nil, fmt.Errorf("mount point %s is not a directory", mnt)
		}
		return "", nil, fmt.Errorf("mount point %s: %w", mnt, err)
	}
	if err := checkEmpty(dir, real, mnt, data); err != nil {
		dir.Close()
		return "", nil, err
	}
	return abs, dir, nil
}

// checkEmpty checks the mount point's directory dir, at real (resolved), named mnt by the
// user: outside data, and empty.
func checkEmpty(dir *os.File, real, mnt, data string) error {
	if realData, err := filepath.EvalSymlinks(data); err == nil && userfile.Within(realData, real) {
		return fmt.Errorf("mount point %s is inside the dataset %s; use a directory outside it", mnt, data)
	}
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", mnt, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("mount point %s is not empty (mounting would hide its %d entries; use an empty directory)", mnt, len(names))
	}
	return nil
}

// openDir opens the directory at path (absolute, its symbolic links resolved) without
// following a symbolic link (userfile.OpenAbsolute): one met on the path is ELOOP or a
// *userfile.FolderChangedError, or ENOTDIR.
func openDir(path string) (*os.File, error) {
	fd, err := userfile.OpenAbsolute(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// errMounted: resolveMountpoint met a mount point.
var errMounted = errors.New("a mount point")

// resolveMountpoint returns abs (absolute) with its symlinks resolved, and errMounted once the
// path it has come to is a mount point in /proc/self/mountinfo. It resolves the symlinks of
// each path's parent directory only, and looks at the path itself (lstat, readlink) only once
// the mount table says it is not a mount point, so it never waits for a mount's daemon.
func resolveMountpoint(abs string) (string, error) {
	p := abs
	for range 40 { // as many links as the kernel follows
		if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			p = filepath.Join(dir, filepath.Base(p))
		} else {
			return p, err
		}
		if IsMountpoint(p) {
			return p, errMounted
		}
		st, err := os.Lstat(p)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			return p, err
		}
		link, err := os.Readlink(p)
		if err != nil {
			return p, err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(p), link)
		}
		p = filepath.Clean(link)
	}
	return p, &os.PathError{Op: "resolve", Path: abs, Err: syscall.ELOOP}
}

// stale reports whether the mount at mnt has lost its daemon: its root answers ENOTCONN. It
// asks through fuseread, so a daemon that does not answer costs at most a second.
func stale(mnt string) bool {
	err := fuseread.Do(context.Background(), time.Second, func() error {
		var st unix.Stat_t
		return unix.Lstat(mnt, &st)
	})
	return errors.Is(err, unix.ENOTCONN)
}

// IsMountpoint reports whether dir (absolute) is listed as a mount point in
// /proc/self/mountinfo.
func IsMountpoint(dir string) bool {
	mounts, _ := mountinfo.Read("/proc/self/mountinfo")
	for _, m := range mounts {
		if m.Mountpoint == dir {
			return true
		}
	}
	return false
}

// Unmount unmounts mnt: directly as root, else through fusermount3 (or fusermount). lazy
// detaches it now even if files are open.
func Unmount(mnt string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = syscall.MNT_DETACH
		}
		if err := syscall.Unmount(mnt, flags); err != nil {
			return fmt.Errorf("cannot unmount %s: %v", mnt, err)
		}
		return nil
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	path, ok := bfs.Fusermount()
	if !ok {
		return fmt.Errorf("cannot unmount %s: fusermount3 not found (install fuse3)", mnt)
	}
	out, err := exec.Command(path, append(args, mnt)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cannot unmount %s: %s", mnt, strings.TrimSpace(string(out)))
	}
	return nil
}
