package diskcache

// The cache's own directory. A --disk-cache directory may be shared (a scratch disk, /tmp)
// and writable by other users, who can plant symbolic links, FIFOs and files of their own in
// it. So the cache writes, deletes and evicts only inside a subdirectory of its own,
// DIR/blockfs-cache-UID (UID: the mounting user's): made mode 0700 and marked by a
// CACHEDIR.TAG that names blockfs, and used only when it is a directory (not a symbolic link)
// owned by that user and writable by no one else, and marked (or empty). Inside it nobody
// but its owner and root can create anything. It is held open by a descriptor, and every
// file is opened, created, renamed and deleted relative to that descriptor, never by a path
// that passes through DIR again: renaming the directory away and planting something in its
// place changes nothing for a live mount.
//
// The lock: one mount per directory (and user). A mount holds a flock on the directory's
// descriptor, and the directory's name in the abstract socket namespace, which no file
// operation can remove: after `rm -rf DIR` under a live mount, a second mount of the same DIR
// is still refused while the first lives (it makes the directory again when it next keeps a
// file). The name is per network namespace; the flock covers a mount in another one while
// the directory lives.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blockfs/blockfs/internal/optname"
	"golang.org/x/sys/unix"
)

const (
	// subPrefix names the cache's own directory in DIR: subPrefix + the user's UID.
	subPrefix = "blockfs-cache-"
	// markerName marks the directory as blockfs's (https://bford.info/cachedir/: backup tools
	// skip a directory so marked).
	markerName = "CACHEDIR.TAG"
	markerSig  = "Signature: 8a477f597d28d172789f06886806bc55"
	// oldLockName is the lock file of the layout before the own directory (DIR/.lock and
	// DIR/FINGERPRINT/*.blk): its presence says an older blockfs used DIR.
	oldLockName = ".lock"
)

// markerText is what the marker says.
var markerText = markerSig + "\n" +
	"# This file is a cache directory tag created by blockfs (blockfs mount " + optname.Flag("disk-cache") + ").\n" +
	"# blockfs keeps copies of a dataset's files here, and deletes only files it wrote here.\n" +
	"# For information about cache directory tags, see https://bford.info/cachedir/\n"

// ErrNotOurs: the path where the cache keeps its files holds something it did not make.
var ErrNotOurs = errors.New("not a disk cache blockfs made for this user")

// subDir returns the directory in dir where this user's mounts keep their files.
func subDir(dir string) string {
	return filepath.Join(dir, fmt.Sprintf("%s%d", subPrefix, os.Geteuid()))
}

// openOwn makes (if missing) and opens sub, the cache's own directory in dir, and checks that
// it is one (see the top of this file). It returns the directory's descriptor; the directory
// is then mode 0700 and marked.
func openOwn(dir, sub string) (int, error) {
	if err := makeDir(dir); err != nil {
		return -1, err
	}
	if err := unix.Mkdir(sub, 0o700); err != nil && err != unix.EEXIST {
		return -1, fmt.Errorf("mkdir %s: %w", sub, err)
	}
	fd, err := openat(unix.AT_FDCWD, sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		var st unix.Stat_t
		switch {
		case unix.Lstat(sub, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return -1, notOurs(sub, "is a symbolic link")
		case errors.Is(err, unix.ENOTDIR):
			return -1, notOurs(sub, "is not a directory")
		}
		return -1, fmt.Errorf("open %s: %w", sub, err)
	}
	if err := checkOwn(fd, sub); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// makeDir makes dir and its missing parents, mode 0700 whatever the umask (the mode of dir
// itself is made so only if this user owns it).
func makeDir(dir string) error {
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return unwrapPath(err)
	}
	fd, err := openat(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil // not a directory now (a link put in its place?): openOwn's checks say so
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && int(st.Uid) == os.Geteuid() && st.Mode&0o7777 != 0o700 {
		_ = unix.Fchmod(fd, 0o700)
	}
	return nil
}

// checkOwn checks the directory open as fd (sub): this user's, writable by no one else, and
// marked or empty (then it marks it). It makes its mode 0700.
func checkOwn(fd int, sub string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", sub, err)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return notOurs(sub, fmt.Sprintf("belongs to uid %d, not to this user (uid %d)", st.Uid, uid))
	}
	if st.Mode&0o022 != 0 {
		return notOurs(sub, fmt.Sprintf("is writable by others (mode %04o)", st.Mode&0o7777))
	}
	if st.Mode&0o7777 != 0o700 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return fmt.Errorf("chmod %s: %w", sub, err)
		}
	}
	if hasMarker(fd) {
		return nil
	}
	names, err := readDirAt(fd, ".")
	if err != nil {
		return fmt.Errorf("%s: %w", sub, unwrapPath(err))
	}
	for _, n := range names {
		if n != markerName { // an unfinished marker of ours is rewritten
			return notOurs(sub, "has files but no blockfs "+markerName)
		}
	}
	if err := writeMarker(fd); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(sub, markerName), err)
	}
	return nil
}

func notOurs(sub, why string) error {
	return fmt.Errorf("%s %s: %w; remove it, or use a %s directory that only you can write", sub, why, ErrNotOurs, optname.Flag("disk-cache"))
}

// hasMarker reports whether the directory open as fd holds blockfs's CACHEDIR.TAG.
func hasMarker(fd int) bool {
	mfd, err := openat(fd, markerName, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(mfd), markerName)
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return strings.HasPrefix(string(b), markerSig) && strings.Contains(string(b), "blockfs")
}

// writeMarker writes the CACHEDIR.TAG in the directory open as fd, replacing one that is not
// blockfs's whole marker.
func writeMarker(fd int) error {
	_ = unix.Unlinkat(fd, markerName, 0)
	mfd, err := openat(fd, markerName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(mfd), markerName)
	if err := unix.Fchmod(mfd, 0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(markerText); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// makeDirAt makes the directory name in the directory open as fd (if missing), mode 0700.
func makeDirAt(fd int, name string) error {
	if err := unix.Mkdirat(fd, name, 0o700); err != nil && err != unix.EEXIST {
		return err
	}
	dfd, err := openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return err
	}
	if st.Mode&0o7777 != 0o700 {
		return unix.Fchmod(dfd, 0o700)
	}
	return nil
}

// openat is openat(2) with O_CLOEXEC and O_NOFOLLOW added, retried on EINTR.
func openat(dirfd int, name string, flag int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flag|unix.O_CLOEXEC|unix.O_NOFOLLOW, perm)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// readDirAt returns the names in the directory name of the directory open as fd, not
// following a symbolic link.
func readDirAt(fd int, name string) ([]string, error) {
	dfd, err := openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	d := os.NewFile(uintptr(dfd), name)
	defer d.Close()
	return d.Readdirnames(-1)
}

// lockDir takes the flock of the directory open as fd, without waiting.
func lockDir(fd int) error {
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return ErrBusy
		}
		return fmt.Errorf("lock: %w", err)
	}
	return nil
}

// claimName takes sub's name in the abstract socket namespace (see the top of this file) and
// holds it until the returned closer is closed. It returns ErrBusy when a process of this user
// holds it (a live mount of sub), and nil, nil when the name cannot be had otherwise (taken
// by another user's process, no abstract sockets): the flock alone then guards sub.
func claimName(sub string, logf func(string, ...any)) (io.Closer, error) {
	name := lockKey(sub)
	for range 3 {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
		if err == nil {
			go func() { // answers who holds the name (holder), nothing else
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			return l, nil
		}
		if !errors.Is(err, unix.EADDRINUSE) {
			logf("blockfs: disk cache %s: no lock name (%v): only the directory's own lock guards it", sub, err)
			return nil, nil
		}
		uid, err := holder(name)
		switch {
		case err == nil && uid == os.Geteuid():
			return nil, ErrBusy
		case err == nil:
			logf("blockfs: disk cache %s: a process of uid %d holds its lock name: only the directory's own lock guards it", sub, uid)
			return nil, nil
		}
		// The holder went between the two (or does not answer): try again.
		time.Sleep(10 * time.Millisecond)
	}
	return nil, ErrBusy
}

// lockKey returns the name in the abstract socket namespace of the lock of sub (an absolute
// path, symbolic links resolved).
func lockKey(sub string) string {
	h := sha256.Sum256([]byte(sub))
	return "@blockfs-disk-cache-" + hex.EncodeToString(h[:16])
}

// holder returns the UID of the process listening on the abstract socket name.
func holder(name string) (int, error) {
	c, err := net.DialTimeout("unix", name, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Uid), nil
}

// oldLayout reports whether an older blockfs's disk cache is in dir (DIR/.lock, and
// DIR/FINGERPRINT/*.blk in n directories). Its files are never used nor deleted: the cache
// cannot tell them from another user's.
func oldLayout(dir string) (n int, ok bool) {
	if st, err := os.Lstat(filepath.Join(dir, oldLockName)); err != nil || !st.Mode().IsRegular() {
		return 0, false
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() && namespaceRE.MatchString(e.Name()) {
			n++
		}
	}
	return n, true
}

// at runs op with the own directory's descriptor, held to read: op makes one system call
// relative to it. With the cache closed, op is not run and the error is EBADF.
func (b *Blocks) at(op func(root int) error) error {
	b.rootMu.RLock()
	defer b.rootMu.RUnlock()
	if b.root < 0 {
		return unix.EBADF
	}
	return op(b.root)
}

// openAt opens rel ("NAMESPACE/NAME") in the own directory with flag (O_NOFOLLOW added; mode
// perm if it creates it) as a file named path for messages.
func (b *Blocks) openAt(rel, path string, flag int, perm uint32) (*os.File, error) {
	var fd int
	err := b.at(func(root int) (err error) {
		fd, err = openat(root, rel, flag, perm)
		return err
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// unlinkAt deletes rel in the own directory; a file already gone is no error.
func (b *Blocks) unlinkAt(rel string) error {
	err := b.at(func(root int) error { return unix.Unlinkat(root, rel, 0) })
	if err != nil && err != unix.ENOENT {
		return &os.PathError{Op: "remove", Path: filepath.Join(b.sub, rel), Err: err}
	}
	return nil
}

// prepare makes the namespace directory, after a file could not be created in it (ENOENT):
// it was never made, or deleted under the mount. When the own directory itself was deleted
// (rm -rf DIR), it makes and checks it again, takes its lock (the name claimed at Open still
// keeps other mounts out) and empties the index: the files it listed are gone.
func (b *Blocks) prepare() error {
	b.rootMu.Lock()
	if b.root < 0 {
		b.rootMu.Unlock()
		return unix.EBADF
	}
	var st unix.Stat_t
	remade := false
	if err := unix.Fstat(b.root, &st); err == nil && st.Nlink == 0 {
		fd, err := openOwn(b.dir, b.sub)
		if err == nil {
			if err = lockDir(fd); err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			b.rootMu.Unlock()
			return fmt.Errorf("making %s again: %w", b.sub, err)
		}
		unix.Close(b.root)
		b.root, remade = fd, true
	}
	err := makeDirAt(b.root, b.ns)
	b.rootMu.Unlock()
	if remade {
		b.logf("blockfs: disk cache %s: %s was deleted under the mount: made again (empty)", b.dir, b.sub)
		b.mu.Lock()
		for el := b.lru.Front(); el != nil; el = el.Next() {
			b.used -= el.Value.(*entry).size
		}
		b.lru.Init()
		clear(b.ents)
		b.mu.Unlock()
	}
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: filepath.Join(b.sub, b.ns), Err: err}
	}
	return nil
}
