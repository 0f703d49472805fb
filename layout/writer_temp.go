package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/privdir"
)

// A writer builds its dataset in a temporary directory next to the destination DST,
// ".DST.tmp-R" (R random), and holds an exclusive flock on ".DST.tmp-R.lock" from before the
// directory exists until after it is gone (renamed to DST, or removed). A pack killed with
// SIGKILL leaves both behind, but the kernel drops its lock: the next writer of the same DST
// (removeStale; RemoveStale for pack --clean) takes the lock of each such leftover without
// waiting, and where it gets it removes the directory, the ".old" one beside it, then the
// lock file. A directory whose
// lock another process holds is being written and is left alone. Directories named like
// these without a lock file (an earlier blockfs's) are left alone too.

// tempDir is a writer's temporary directory and the lock that marks it live.
type tempDir struct {
	path string
	lock *os.File // flocked until release
}

// tempPrefix is the prefix of dst's temporary directories' names.
func tempPrefix(dst string) string { return "." + filepath.Base(dst) + ".tmp-" }

// lockSuffix ends the name of a temporary directory's lock file.
const lockSuffix = ".lock"

// oldSuffix ends the name a replaced dataset is moved to when the filesystem cannot exchange
// it with the new one in one rename (replaceDir).
const oldSuffix = ".old"

// newTempDir creates and locks a new temporary directory for dst, with mode 0777 less the
// umask, as mkdir(1) would: the dataset it becomes is readable by whoever the user's umask lets
// read it (os.MkdirTemp makes it 0700).
func newTempDir(dst string) (*tempDir, error) {
	parent, prefix := filepath.Dir(dst), tempPrefix(dst)
	for try := 0; ; try++ {
		p := filepath.Join(parent, prefix+strconv.FormatUint(uint64(rand.Uint32()), 36))
		lock, err := os.OpenFile(p+lockSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			lock.Close()
			os.Remove(p + lockSuffix)
			return nil, fmt.Errorf("cannot lock %s: %w", p+lockSuffix, err)
		}
		if err := os.Mkdir(p, 0o777); err != nil {
			os.Remove(p + lockSuffix)
			lock.Close()
			if errors.Is(err, fs.ErrExist) && try < 100 {
				continue
			}
			return nil, err
		}
		return &tempDir{path: p, lock: lock}, nil
	}
}

// release removes the temporary directory (what is left of it: nothing once renamed into
// place) and then its lock file, and lets go of the lock. Safe to call more than once.
func (t *tempDir) release() error {
	if t == nil || t.path == "" {
		return nil
	}
	err := os.RemoveAll(t.path)
	if err == nil {
		err = os.RemoveAll(t.path + oldSuffix)
	}
	if t.lock != nil {
		if err == nil {
			err = os.Remove(t.path + lockSuffix)
		}
		t.lock.Close()
		t.lock = nil
	}
	t.path = ""
	return err
}

// removeStale is RemoveStale for a writer about to start: best effort (a leftover this user
// cannot remove, another's, must not stop the pack), and before the writer checks whether dst
// exists, since a dataset put back at dst is one to keep without --force.
func removeStale(dst string) { _, _ = RemoveStale(dst) }

// RemoveStale removes the temporary directories that writers of dst killed before they
// finished left next to it (".DST.tmp-*" whose lock no process holds), and returns their
// paths; the first error, if one could not be removed, after trying the others. One whose
// writer is still running is left alone. Where a killed writer had moved the
// dataset it was replacing aside and dst is missing, that dataset is put back at dst.
func RemoveStale(dst string) ([]string, error) {
	dst = filepath.Clean(dst)
	parent, prefix := filepath.Dir(dst), tempPrefix(dst)
	ents, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot list %s for what an interrupted pack left: %w", parent, err)
	}
	var removed []string
	var first error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, lockSuffix) || !e.Type().IsRegular() {
			continue
		}
		dir := filepath.Join(parent, strings.TrimSuffix(name, lockSuffix))
		gone, err := removeIfDead(dir, dst)
		if err != nil && first == nil {
			first = err
		}
		if gone {
			removed = append(removed, dir)
		}
	}
	return removed, first
}

// removeIfDead takes dir's lock without waiting and, if it gets it (its writer is gone),
// removes dir and dir.old (or puts dir.old back at dst where dst is missing), then the lock
// file. It reports whether it did.
func removeIfDead(dir, dst string) (bool, error) {
	lock, err := os.Open(dir + lockSuffix) // flock needs no write permission
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // another pack cleaned it up just now
	}
	if err != nil {
		return false, fmt.Errorf("cannot open %s: %w", dir+lockSuffix, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // a live writer's
		}
		return false, fmt.Errorf("cannot lock %s: %w", dir+lockSuffix, err)
	}
	if st, err := os.Lstat(dir + lockSuffix); err != nil || !sameFile(st, lock) || !mine(st) {
		return false, nil // removed and maybe made anew after we opened it, or another user's
	}
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		if st, err := os.Lstat(dir + oldSuffix); err == nil {
			// Put back only a folder of this user's, or of the folder's owner (root's pack
			// replacing a user's dataset): anything else beside a lock of this user's name could
			// have been planted by another user, to become dst. Such a thing is left as it is,
			// not removed: it may be a dataset.
			if !st.IsDir() || !(mine(st) || sameOwner(st, filepath.Dir(dst))) {
				return false, nil
			}
			if err := os.Rename(dir+oldSuffix, dst); err != nil {
				return false, fmt.Errorf("cannot put the dataset an interrupted pack moved aside back at %s: %w", dst, err)
			}
		}
	}
	for _, p := range []string{dir, dir + oldSuffix} {
		if err := os.RemoveAll(p); err != nil {
			return false, fmt.Errorf("cannot remove %s, left by an interrupted pack: %w", p, err)
		}
	}
	if err := os.Remove(dir + lockSuffix); err != nil {
		return false, err
	}
	return true, nil
}

// sameOwner reports whether st is of a file the owner of the folder at dir owns.
func sameOwner(st fs.FileInfo, dir string) bool {
	d, err := os.Lstat(dir)
	return err == nil && privdir.Owner(st) >= 0 && privdir.Owner(st) == privdir.Owner(d)
}

// mine reports whether st is of a file this process's user owns.
func mine(st fs.FileInfo) bool { return privdir.Owner(st) == os.Geteuid() }

// sameFile reports whether st is the file f has open.
func sameFile(st fs.FileInfo, f *os.File) bool {
	fst, err := f.Stat()
	return err == nil && os.SameFile(st, fst)
}
