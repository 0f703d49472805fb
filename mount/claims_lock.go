package mount

import (
	"errors"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/blockfs/blockfs/internal/sysmem"
	"golang.org/x/sys/unix"
)

// Two daemons planning at the same moment each read the others' claims before either had
// written its own, and each planned a budget from the same free memory (two 18 GB budgets on
// a 24 GB machine, in 2 of 3 rounds). So a daemon (Options.RecordClaim) takes the registry's
// planning lock before it first reads the claims and holds it until its own planned claim is
// in the registry (recordClaim, at the end of New; serving rewrites the entry with where it
// is mounted): the plans of this user's mounts are made one after another. The lock is an
// flock on .plan.lock in RegistryDir, which the kernel drops when a daemon dies; a daemon
// waits for it at most planWait, then plans without it (a mount whose planning stalls does
// not hold up every other), and says so.

// planWait bounds the wait for another mount's planning.
const planWait = 30 * time.Second

var planLock struct {
	sync.Mutex
	f *os.File // held (LOCK_EX) from lockPlans until unlockPlans; nil when not
}

// lockPlans takes the planning lock for this process, once: later calls before unlockPlans
// return at once.
func lockPlans() {
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

// unlockPlans releases the planning lock, if this process holds it.
func unlockPlans() {
	planLock.Lock()
	defer planLock.Unlock()
	if planLock.f != nil {
		planLock.f.Close() // drops the flock
		planLock.f = nil
	}
}

// claimed is Claimed for p's plan; a daemon's (RecordClaim) takes the planning lock first.
func (p *Plan) claimed(mem sysmem.Memory, openData, fingerprint string) int64 {
	if p.opt.RecordClaim {
		lockPlans()
	}
	return Claimed(mem, openData, fingerprint)
}

// recordClaim writes what p planned to the registry as this daemon's entry, before it mounts:
// an entry that names no mount counts while its daemon lives, so the mounts planned after this
// one leave its memory to it. Serving rewrites the entry once mounted (register).
func (p *Plan) recordClaim() {
	fp := ""
	if p.ds != nil && p.mix == nil && p.fields == nil {
		fp = p.ds.Manifest.Fingerprint()
	}
	writeClaim(map[string]any{"open_data": p.loc.Abs, "fingerprint": fp, "memory": p.mem.Facts()}, "")
}
