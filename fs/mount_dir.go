package fs

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/userfile"
)

// A mount as root is made here, through the directory its check opened (Options.MountDir),
// not by go-fuse from the mount point's path. The check (daemon.CheckMountpoint) opened the
// directory without following a symbolic link and looked at it through that descriptor;
// mount(2) given /proc/self/fd/N mounts on the very directory it names, whatever the path
// names by then. From the path, a user who can write in a directory on it (root mounting at
// /home/alice/epochs) could swap a component for a symbolic link between the check and the
// mount, and have root mount over /etc. go-fuse then serves the connection as it serves a
// /dev/fd/N a parent mounted. The Server unmounts, detaches and removes the mount point
// through the same directory (Unmount, Detach, RemoveDir); where mount(2) through it fails (no
// /proc), go-fuse mounts by the path as before.

// serveFUSE mounts mnt and serves root there with fopt: as root through opt.MountDir when
// set (mountOn; it returns the directory, which the Server unmounts through), else by
// go-fuse (through fusermount3 without root), or on the connection /dev/fd/N a parent mounted.
func serveFUSE(mnt string, root gofs.InodeEmbedder, fopt *gofs.Options, opt Options) (*fuse.Server, *os.File, error) {
	fd := FuseFD(mnt)
	serveAt, own := mnt, (*os.File)(nil)
	if fd < 0 && fopt.DirectMount && opt.MountDir != nil {
		if ffd, dir, err := mountOn(opt.MountDir, &fopt.MountOptions); err == nil {
			serveAt, own = fmt.Sprintf("/dev/fd/%d", ffd), dir
		} else {
			log.Printf("blockfs: cannot mount through the directory checked (%v); mounting by the path %s", err, mnt)
		}
	}
	if fd >= 0 || own != nil {
		// The connection is mounted already (by the parent, with its own options, or by
		// mountOn). go-fuse's direct mount (as root) would open a new /dev/fuse and mount it
		// over where /dev/fd/N leads: the device node.
		fopt.DirectMount = false
	}
	srv, err := gofs.Mount(serveAt, root, fopt)
	if err != nil {
		if own != nil {
			_ = unmountOwn(own, mnt, unix.MNT_DETACH)
			own.Close()
		}
		if fd >= 0 {
			return nil, nil, fmt.Errorf("cannot serve the FUSE connection on %s: %w", mnt, err)
		}
		return nil, nil, mountError(mnt, opt.AllowOther, err)
	}
	if own != nil {
		dev, err := pollHack(own)
		if err != nil {
			log.Printf("blockfs: the kernel may poll files of %s (%v): reading them from the daemon's own process could hang", mnt, err)
		} else {
			raiseReadahead(dev)
		}
	}
	return srv, own, nil
}

// mountError says why a mount at mnt failed.
func mountError(mnt string, allowOther bool, err error) error {
	if why := whyNoMount(allowOther, err); why != "" {
		return fmt.Errorf("cannot mount at %s: %s", mnt, why)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("cannot mount at %s: %v (without root, FUSE needs fusermount3 from the fuse3 package and read-write access to /dev/fuse)", mnt, err)
	}
	return fmt.Errorf("cannot mount at %s: %w", mnt, err)
}

// mountOn mounts a new FUSE connection with o's options on dir, as go-fuse's direct mount
// would on a path, and returns the /dev/fuse descriptor and a descriptor of dir of its own,
// which unmountOwn unmounts through.
func mountOn(dir *os.File, o *fuse.MountOptions) (int, *os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		return -1, nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return -1, nil, syscall.ENOTDIR
	}
	keep, err := unix.FcntlInt(dir.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return -1, nil, err
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(keep)
		return -1, nil, err
	}
	opts := []string{
		fmt.Sprintf("fd=%d", fd),
		fmt.Sprintf("rootmode=%o", st.Mode&unix.S_IFMT),
		fmt.Sprintf("user_id=%d", os.Geteuid()),
		fmt.Sprintf("group_id=%d", os.Getegid()),
		fmt.Sprintf("max_read=%d", maxRead(o.MaxWrite)),
	}
	// "ro", "default_permissions": what blockfs gives (go-fuse's direct mount turns
	// nodev/nosuid/noexec and their opposites into flags; blockfs gives none of them).
	opts = append(opts, o.Options...)
	if o.AllowOther {
		opts = append(opts, "allow_other")
	}
	source := o.FsName
	if source == "" {
		source = o.Name
	}
	if err := unix.Mount(source, procFD(keep), "fuse."+o.Name, unix.MS_NOSUID|unix.MS_NODEV, strings.Join(opts, ",")); err != nil {
		unix.Close(fd)
		unix.Close(keep)
		return -1, nil, err
	}
	return fd, os.NewFile(uintptr(keep), dir.Name()), nil
}

// pollHackName is the name go-fuse answers at a mount's root for pollHack, with a file of
// inode pollHackInode (its fuse.pollHackName and pollHackInode).
const (
	pollHackName  = ".go-fuse-epoll-hack"
	pollHackInode = ^uint64(0)
)

// pollHack has the kernel learn that the mount on dir answers no poll, as go-fuse's
// Server.WaitMount does for the mounts it makes itself: the Go runtime adds every file this
// process opens to its epoll set, and the kernel then asks the mount to poll the file, from a
// thread the runtime may have given its last slot to, so that none is left to answer (a test
// that reads its own mount hung so). A poll of go-fuse's file at the root, answered ENOSYS,
// stops the kernel asking. It returns the mount's device. The mount is found where dir is now
// (a mount point cannot be renamed), without following a symlink or waiting on a FIFO, and
// the file must be go-fuse's.
func pollHack(dir *os.File) (uint64, error) {
	at, err := os.Readlink(procFD(int(dir.Fd())))
	if err != nil {
		return 0, err
	}
	fd, err := userfile.OpenAbsolute(filepath.Join(at, pollHackName), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	if st.Ino != pollHackInode {
		return 0, fmt.Errorf("%s is not go-fuse's", filepath.Join(at, pollHackName))
	}
	unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLPRI | unix.POLLOUT}}, 0) // its answer does not matter
	return st.Dev, nil
}

// removeDir removes the directory dir (once unmounted: the mount point of a mount made through
// it) from the folder it is in now, found without following a symlink, and only if the name
// there is still dir itself.
func removeDir(dir *os.File) error {
	at, err := os.Readlink(procFD(int(dir.Fd())))
	if err != nil {
		return err
	}
	parent, err := userfile.OpenAbsolute(filepath.Dir(at), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return fmt.Errorf("cannot remove %s: %w", at, err)
	}
	defer unix.Close(parent)
	var st, was unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &was); err != nil {
		return err
	}
	name := filepath.Base(at)
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Dev != was.Dev || st.Ino != was.Ino {
		return fmt.Errorf("cannot remove %s: it is no longer the mount point's directory", at)
	}
	if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("cannot remove %s: %w", at, err)
	}
	return nil
}

// procFD names descriptor fd's file: /proc/self/fd/N.
func procFD(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// maxRead is the max_read go-fuse would give the kernel for MaxWrite w: w, within the
// kernel's largest request (/proc/sys/fs/fuse/max_pages_limit pages).
func maxRead(w int) int {
	b, err := os.ReadFile("/proc/sys/fs/fuse/max_pages_limit")
	if err != nil {
		return w
	}
	var pages int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pages); err == nil && pages > 0 {
		return min(w, pages*os.Getpagesize())
	}
	return w
}

// unmountOwn unmounts the mount mountOn made on dir (its own descriptor) with umount2's flags
// (MNT_DETACH: lazily), trying again for a while when the kernel still counts a file open
// (EBUSY, which a lazy unmount never is), as go-fuse's Unmount does.
// umount2 given /proc/self/fd/N unmounts what is mounted on the directory N names, wherever
// its path leads by then; EINVAL there is nothing mounted on it any more (unmounted by
// blockfs unmount or umount): done, and no path is asked, where another mount may be now.
func unmountOwn(dir *os.File, mnt string, flags int) error {
	var err error
	delay := time.Duration(0)
	for range 5 {
		err = unix.Unmount(procFD(int(dir.Fd())), flags)
		if err == nil || errors.Is(err, unix.EINVAL) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		delay = 2*delay + 5*time.Millisecond
		time.Sleep(delay)
	}
	return fmt.Errorf("cannot unmount %s: %w", mnt, err)
}
