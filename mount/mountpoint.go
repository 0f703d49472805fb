package mount

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/internal/mountinfo"
)

// CheckMountpoint requires an existing, empty directory that is not already a mount point and
// is not inside data (the dataset's directory, or the file it serves in place). It returns its
// absolute path. A mount point /dev/fd/N (bfs.FuseFD) is instead a /dev/fuse descriptor a
// parent has mounted (checkFuseFD); it is returned as it is.
func CheckMountpoint(mnt, data string) (string, error) {
	if fd := bfs.FuseFD(mnt); fd >= 0 {
		return mnt, checkFuseFD(mnt, fd)
	}
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("mount point %s does not exist (create it with mkdir)", mnt)
		}
		if pe, ok := err.(*os.PathError); ok && pe.Err == syscall.ENOTCONN {
			return "", fmt.Errorf("mount point %s is a stale mount (clear it with 'blockfs unmount %s')", mnt, mnt)
		}
		return "", fmt.Errorf("mount point %s: %w", mnt, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("mount point %s is not a directory", mnt)
	}
	realMnt, err1 := filepath.EvalSymlinks(abs)
	realData, err2 := filepath.EvalSymlinks(data)
	if err1 == nil && err2 == nil && inside(realMnt, realData) {
		return "", fmt.Errorf("mount point %s is inside the dataset %s; use a directory outside it", mnt, data)
	}
	if IsMountpoint(abs) {
		return "", fmt.Errorf("%s is already a mount point (unmount it first: blockfs unmount %s)", mnt, mnt)
	}
	ents, err := os.ReadDir(abs)
	if err != nil {
		return "", fmt.Errorf("mount point %s: %w", mnt, err)
	}
	if len(ents) > 0 {
		return "", fmt.Errorf("mount point %s is not empty (mounting would hide its %d entries; use an empty directory)", mnt, len(ents))
	}
	return abs, nil
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

// IsBlockfsMount reports whether dir is where a blockfs mount is: the topmost mount at dir,
// after symlinks, is a fuse.blockfs one in /proc/self/mountinfo. A .blockfs/info.json in a
// directory that is not one was not written by blockfs, and must not be trusted.
func IsBlockfsMount(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	mounts, _ := mountinfo.Read("/proc/self/mountinfo")
	top := ""
	for _, m := range mounts {
		if m.Mountpoint == abs {
			top = m.FSType // a later line is mounted over an earlier one
		}
	}
	return top == "fuse."+bfs.Type
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
