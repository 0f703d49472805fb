package pack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Two merges of one OUT at once (a job retried while the first still runs, two nodes given
// the same step) would each write OUT's manifest or index from what it read, and one would
// remove the other's temporary directory as stale. A merge of a local OUT holds an exclusive
// flock on OUT/mergeLockName from before it reads the parts until it has written: a second
// merge is refused at once, saying so. The kernel drops the lock when a merge dies; the file
// stays (empty).
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
