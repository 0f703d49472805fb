package daemon

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/blockfs/blockfs/internal/optname"
)

// A mount with a users lock (mount.Options.UsersLock, --users-lock FILE) lasts while some process
// holds a POSIX (fcntl) lock on FILE, and ends itself within usersPoll of the last one going,
// whatever ended it: a clean exit, SIGTERM, kill -9, a crashed node agent. POSIX locks belong to
// a process: the kernel drops them when it dies, and a fork (a DataLoader worker) does not
// inherit them, so a worker that outlives its parent does not keep the mount. blockfs.Mount
// takes a read lock on FILE for as long as a process uses the mount.
//
// The daemon decides under an exclusive flock on FILE.setup, the lock users take to mount,
// attach or leave, so it never ends a mount that a user is attaching to. Having decided, it
// unmounts lazily (open files keep working until closed, at most drainTime), removes FILE and
// FILE.setup, and the mountpoint with mount.Options.RemoveMountpoint.

// usersPoll is how often the daemon looks for the users lock's holders.
const usersPoll = 500 * time.Millisecond

// SetupLock is the lock file that users hold while they mount, attach or leave.
func SetupLock(usersLock string) string { return usersLock + ".setup" }

// CheckUsersLock checks that the users lock exists and is a regular file (the user made it
// before mounting), and returns its absolute path.
func CheckUsersLock(path string) (string, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return "", optname.Errorf("users-lock", optname.Flag("users-lock")+" %s: %v (create the file and hold a lock on it before mounting)", path, errors.Unwrap(err))
	}
	if !st.Mode().IsRegular() {
		return "", optname.Errorf("users-lock", optname.Flag("users-lock")+" %s is not a regular file", path)
	}
	return filepath.Abs(path)
}

// UsersWatch is the goroutine that ends the mount when its last user is gone.
type UsersWatch struct {
	gone     chan struct{} // closed once it has detached the mount and removed the lock files
	quit     chan struct{}
	finished chan struct{}
}

// Gone returns a channel closed once the watch has detached the mount and removed the lock
// files.
func (w *UsersWatch) Gone() <-chan struct{} { return w.gone }

// MountEnd is how the users watch ends a mount: Detach unmounts it lazily, Remove removes its
// mount point (--remove-mountpoint) once unmounted. The mount's Server gives them: as root,
// through the directory it mounted on, not through a path another user may have changed.
type MountEnd struct {
	Detach func() error
	Remove func() error
}

// WatchUsers polls the users lock until no process holds it, then ends the mount at mnt (end:
// detaches it, and with rmdir removes the mount point) and closes Gone's channel.
func WatchUsers(lock, mnt string, end MountEnd, rmdir bool) *UsersWatch {
	w := &UsersWatch{gone: make(chan struct{}), quit: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(w.finished)
		t := time.NewTicker(usersPoll)
		defer t.Stop()
		for {
			select {
			case <-w.quit:
				return
			case <-t.C:
			}
			ended, err := endIfUnused(lock, mnt, end, rmdir)
			if err != nil {
				log.Printf("blockfs: users lock: %v", err)
			}
			if ended {
				close(w.gone)
				return
			}
		}
	}()
	return w
}

// Stop ends the watch and waits for it: a watcher that is ending the mount (the server
// stops as soon as it is detached) finishes removing the lock files before the daemon exits.
func (w *UsersWatch) Stop() {
	close(w.quit)
	<-w.finished
}

// endIfUnused takes the setup lock without waiting (a user busy with it is alive) and, if no
// process holds the users lock, unmounts lazily and removes what the users left. It reports
// whether the mount ended.
func endIfUnused(lock, mnt string, end MountEnd, rmdir bool) (bool, error) {
	setup, err := flockSetup(SetupLock(lock))
	if err != nil || setup == nil {
		return false, err
	}
	defer setup.release()
	holder, err := lockHolder(lock)
	if err != nil || holder != 0 {
		return false, err
	}
	log.Printf("blockfs: no process holds %s any more: unmounting %s", lock, mnt)
	if err := end.Detach(); err != nil {
		return false, err
	}
	for _, p := range []string{lock, SetupLock(lock)} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			log.Printf("blockfs: %v", err)
		}
	}
	if rmdir {
		if err := end.Remove(); err != nil {
			log.Printf("blockfs: %v", err)
		}
	}
	return true, nil
}

// heldSetup is the setup lock, held.
type heldSetup struct {
	f       *os.File
	path    string
	created bool // made here: removed again on release, so that nothing is left behind
}

// flockSetup takes the setup lock at path without waiting. It returns nil when another
// process holds it, or when path was replaced meanwhile (look again later). A missing file
// (no user has made it, or the last one removed it as it left) is made, O_EXCL, and removed on
// release.
func flockSetup(path string) (*heldSetup, error) {
	h := &heldSetup{path: path}
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if os.IsNotExist(err) {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if os.IsExist(err) {
			return nil, nil // a user made it just now
		}
		h.created = err == nil
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	held, err1 := f.Stat()
	now, err2 := os.Lstat(path)
	if err1 != nil || err2 != nil || !os.SameFile(held, now) {
		f.Close()
		return nil, nil
	}
	h.f = f
	return h, nil
}

// release removes the file if flockSetup made it (still holding the lock, as users do: a
// waiter then finds the file replaced and starts again) and unlocks.
func (h *heldSetup) release() {
	if h.created {
		_ = os.Remove(h.path)
	}
	h.f.Close()
}

// lockHolder returns the pid of a process holding a POSIX lock on path, 0 when none does
// (also when path is gone: its users removed it as they left).
func lockHolder(path string) (int32, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, err
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if lk.Type == syscall.F_UNLCK {
		return 0, nil
	}
	return lk.Pid, nil
}
