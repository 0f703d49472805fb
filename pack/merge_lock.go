package pack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/source/objstore"
)

// Two merges of one OUT at once (a job retried while the first still runs, two nodes given
// the same step) would each write OUT's manifest or index from what it read, and one would
// remove the other's temporary directory as stale. A merge of a local OUT holds an exclusive
// flock on OUT/mergeLockName from before it reads the parts until it has written: a second
// merge is refused at once, saying so. The kernel drops the lock when a merge dies; the file
// stays (empty). A merge into an object store creates the object OUT/mergeLockName instead
// (lockStoreMerge).
const mergeLockName = ".blockfs-merge.lock"

// lockMerge takes OUT's merge lock, or says that another merge holds it.
func lockMerge(out string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(out, mergeLockName), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist: pack or index the parts into it first", out)
		}
		return nil, fmt.Errorf("cannot lock %s for the merge: %w", out, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("cannot lock %s for the merge: %s is not a regular file", out, mergeLockName)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another merge of %s is running: wait for it to end (and merge again if it failed)", out)
		}
		return nil, fmt.Errorf("cannot lock %s for the merge: %w", out, err)
	}
	return func() { f.Close() }, nil
}

// storeLock is what a merge into an object store writes as OUT/mergeLockName: who holds it,
// and a token of its own by which it tells its lock from another's.
type storeLock struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Token   string    `json:"token"`
	// Where PID is a process: the kernel's boot and the PID namespace (containers that share
	// a host name may not see each other's processes).
	Boot  string `json:"boot_id,omitempty"`
	PIDNS string `json:"pid_ns,omitempty"`
}

// thisProcess returns the lock this process would write, less its token.
func thisProcess() storeLock {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return storeLock{Host: host, PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Second),
		Boot: strings.TrimSpace(string(boot)), PIDNS: ns}
}

// gone reports whether the lock's process is known to have ended: it ran on this host, since
// this boot, in this PID namespace, and there is no such process now.
func (l storeLock) gone() bool {
	me := thisProcess()
	return l.PID > 0 && l.Host == me.Host && l.Boot != "" && l.Boot == me.Boot && l.PIDNS != "" && l.PIDNS == me.PIDNS &&
		unix.Kill(l.PID, 0) == unix.ESRCH
}

// maxLockFile bounds the lock object read back.
const maxLockFile = 4096

// lockStoreMerge takes the merge lock of an object store's prefix: the object
// OUT/mergeLockName, created only where there is none (a conditional create, which the store
// grants to one of two merges at once). A store keeps the object when a merge dies: the
// refusal says whose it is and how to remove it. unlock removes it while it is still this
// merge's (read, then removed: a lock removed by hand and made by another merge in between
// would go too; the stores' conditional deletes differ too much to be worth it here).
func lockStoreMerge(ctx context.Context, st *objstore.Store) (unlock func(), err error) {
	var tok [12]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	me := thisProcess()
	me.Token = hex.EncodeToString(tok[:])
	body, _ := json.Marshal(me)
	if err := st.Create(ctx, mergeLockName, body); err != nil {
		// A try whose answer was lost may have made it: the lock is this merge's if it holds
		// this merge's token.
		held, rerr := readStoreLock(st)
		switch {
		case rerr == nil && held.Token == me.Token:
		case !errors.Is(err, objstore.ErrObjectExists):
			return nil, fmt.Errorf("cannot lock %s for the merge: %w", st.Location(), err)
		default:
			return nil, lockHeld(st, held, rerr)
		}
	}
	return func() {
		if held, err := readStoreLock(st); err == nil && held.Token == me.Token {
			rm, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = st.Remove(rm, mergeLockName)
		}
	}, nil
}

// readStoreLock reads the lock object.
func readStoreLock(st *objstore.Store) (storeLock, error) {
	var l storeLock
	b, err := st.ReadFile(mergeLockName, maxLockFile)
	if err == nil {
		err = json.Unmarshal(b, &l)
	}
	return l, err
}

// lockHeld is the refusal of a merge whose store's lock another holds (held; err where it
// could not be read).
func lockHeld(st *objstore.Store, held storeLock, err error) error {
	obj := st.Path(mergeLockName)
	if err != nil {
		return fmt.Errorf("another merge of %s holds its lock %s (unreadable: %v): wait for it to end; if none runs, remove %s and merge again", st.Location(), obj, err, obj)
	}
	who := fmt.Sprintf("%s pid %d, since %s", hostName(held.Host), held.PID, held.Started.Format(time.RFC3339))
	if held.gone() {
		return fmt.Errorf("a merge of %s that is gone (%s) left its lock %s: remove it and merge again", st.Location(), who, obj)
	}
	return fmt.Errorf("another merge of %s is running (%s): wait for it to end (and merge again if it failed); if it is gone, remove %s and merge again", st.Location(), who, obj)
}

// hostName is a lock's host as a message shows it: as written where it is a host name (up to
// 255 printable ASCII bytes), else quoted and cut (anyone who can write the store wrote it).
func hostName(h string) string {
	ok := len(h) > 0 && len(h) <= 255
	for i := 0; ok && i < len(h); i++ {
		ok = h[i] > ' ' && h[i] < 0x7f
	}
	if ok {
		return h
	}
	return fmt.Sprintf("%.66q", h)
}
