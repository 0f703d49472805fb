package daemon

import (
	"errors"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Two daemons planning at the same moment each read the others' claims before either had
// written its own, and each planned a budget from the same free memory (two 18 GB budgets on
// a 24 GB machine, in 2 of 3 rounds). So a daemon (mount.Options.RecordClaim) takes the registry's
// planning lock before it first reads the claims and holds it until its own planned claim is
// in the registry (mount's recordClaim, at the end of mount.New; serving rewrites the entry with where it
// is mounted): the plans of this user's mounts are made one after another. The lock is an
// flock on .plan.lock in RegistryDir, which the kernel drops when a daemon dies; a daemon
// waits for it at most planWait, then plans without it (a mount whose planning stalls does
// not hold up every other), and says so.

// planWait bounds the wait for another mount's planning.
const planWait = 30 * time.Second

var planLock struct {
	sync.Mutex
	f *os.File // held (LOCK_EX) from LockPlans until UnlockPlans; nil when not
}

// LockPlans takes the planning lock for this process, once: later calls before UnlockPlans
// return at once.
func LockPlans() {
	planLock.Lock()
	defer planLock.Unlock()
	if planLock.f != nil {
		return
	}
	dir := RegistryDir()
	if err := privateDir(dir); err != nil {
		log.Printf("blockfs: cannot take the planning lock in %s (%v): planning without it", dir, err)
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, ".plan.lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o600)
	if err != nil {
		log.Printf("blockfs: cannot take the planning lock in %s (%v): planning without it", dir, err)
		return
	}
	for deadline := time.Now().Add(planWait); ; {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			planLock.f = f
			return
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			log.Printf("blockfs: another mount has been planning its memory for %v (%v): planning without waiting for its claim", planWait, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// UnlockPlans releases the planning lock, if this process holds it.
func UnlockPlans() {
	planLock.Lock()
	defer planLock.Unlock()
	if planLock.f != nil {
		planLock.f.Close() // drops the flock
		planLock.f = nil
	}
}
