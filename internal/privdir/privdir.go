// Package privdir makes the directories blockfs keeps things in on a user's behalf without
// being told where (the automatic index of shards served in place), so that nothing another
// user could plant there is ever trusted. A directory is private when it is a directory (not
// a symlink to one), belongs to the process's effective user (or to root) and no one else may
// write in it: then only that user, or root, can have made what it holds. In a shared /tmp,
// or under another user's $HOME (sudo -E), a path anyone can compute is not.
package privdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotPrivate is wrapped by every refusal of Make and Check.
var ErrNotPrivate = errors.New("not a private directory")

// Make returns base/sub[0]/sub[1]/..., each directory from base down private: made with mode
// 0700 where missing (base with its parents), and checked (Check) where it was there. base may
// be a symlink (a ~/.cache on a scratch disk): where it leads is checked, and used. It refuses,
// wrapping ErrNotPrivate, the first that is not private.
func Make(base string, sub ...string) (string, error) {
	if err := os.MkdirAll(base, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(base)
	if err != nil {
		return "", err
	}
	if err := Check(dir); err != nil {
		return "", err
	}
	for _, s := range sub {
		dir = filepath.Join(dir, s)
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		if err := Check(dir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// Check returns nil if dir is private, an error wrapping ErrNotPrivate that says why if it is
// not, and the error of its lstat if it cannot be looked at (fs.ErrNotExist for none there).
func Check(dir string) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	me := uint32(os.Geteuid())
	switch {
	case st.Mode&syscall.S_IFMT == syscall.S_IFLNK:
		return fmt.Errorf("%s is a symlink: %w", dir, ErrNotPrivate)
	case st.Mode&syscall.S_IFMT != syscall.S_IFDIR:
		return fmt.Errorf("%s is not a directory: %w", dir, ErrNotPrivate)
	case st.Uid != me && st.Uid != 0:
		return fmt.Errorf("%s belongs to uid %d, not to this user (uid %d): %w", dir, st.Uid, me, ErrNotPrivate)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s may be written by others (mode %04o): %w", dir, st.Mode&0o7777, ErrNotPrivate)
	}
	return nil
}

// Owner returns the uid that owns the file st describes, or -1 where st carries none.
func Owner(st fs.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}
