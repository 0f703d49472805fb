package diskcache

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/source"
)

// These tests put the disk cache in a directory that others can write (issue 26, item 5): they
// name the cache's files by glob, whatever the layout, so that they run against the layout
// before the cache's own directory too (and fail there).

// copyOf returns the path of file id's copy under dir.
func copyOf(t *testing.T, dir string, m *memSource, id int) string {
	t.Helper()
	name := fmt.Sprintf("%d-%08x-%d.blk", id, crc32c.Checksum(m.files[id]), len(m.files[id]))
	for _, pat := range []string{filepath.Join(dir, "*", name), filepath.Join(dir, "*", "*", name)} {
		if found, _ := filepath.Glob(pat); len(found) == 1 {
			return found[0]
		}
	}
	t.Fatalf("no copy of file %d (%s) under %s", id, name, dir)
	return ""
}

// openLogged opens a cache whose log lines the test can read.
func openLogged(t *testing.T, m *memSource, dir string, size int64) (*Blocks, func() string) {
	t.Helper()
	var mu sync.Mutex
	var logs []string
	b, err := Open(m, m, Options{Dir: dir, Size: size, Namespace: ns, Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b, func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(logs, "\n")
	}
}

// readAll reads every file of m whole through b, exact.
func readAll(t *testing.T, b *Blocks, m *memSource) {
	t.Helper()
	for id := range m.files {
		got, err := read(b, source.FileID(id), 0, int64(len(m.files[id])))
		require.NoError(t, err, "file %d", id)
		require.True(t, bytes.Equal(got, m.files[id]), "file %d", id)
	}
}

// TestPrivateModes: the cache makes no file or directory that others can read, whatever the
// umask (it was 0755 directories and 0644 files under umask 022), and an umask that takes the
// owner's bits leaves copies it can still read back.
func TestPrivateModes(t *testing.T) {
	for _, mask := range []int{0, 0o022, 0o277} {
		t.Run(fmt.Sprintf("umask %04o", mask), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dc") // made by the cache
			old := syscall.Umask(mask)
			defer syscall.Umask(old)
			m := newMem(4096, 5000, 1<<20)
			b := open(t, m, dir, 64<<20)
			readAll(t, b, m)
			require.NoError(t, b.Close())
			m.fail.Store(true) // the second open reads every file from disk
			b = open(t, m, dir, 64<<20)
			readAll(t, b, m)
			require.EqualValues(t, len(m.files), b.Stats().Hits)
			files := 0
			require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				require.NoError(t, err)
				st, err := os.Lstat(p)
				require.NoError(t, err)
				if st.IsDir() {
					require.Equal(t, fs.FileMode(0o700), st.Mode().Perm(), "%s", p)
				} else {
					require.True(t, st.Mode().IsRegular(), "%s", p)
					require.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), "%s", p)
					files++
				}
				return nil
			}))
			require.GreaterOrEqual(t, files, len(m.files))
		})
	}
}

// TestForeignFilesUntouched: files the cache did not write, in its directory or anywhere
// below it, are never deleted or evicted, whatever their names (every *.tmp in every
// subdirectory was deleted at open, and any *.blk evicted by the size bound).
func TestForeignFilesUntouched(t *testing.T) {
	dir := t.TempDir()
	foreign := map[string]string{
		"alice-job/results.tmp":              "alice's results",
		"bob/model.blk":                      "bob's model",
		ns + "/0-00000000-5.blk.tmp":         "a name like the cache's",
		ns + "/7-00000000-5.blk":             "another",
		"notes.tmp":                          "carol's notes",
		"0123456789abcdef/1-deadbeef-44.blk": "dave's",
	}
	write := func(files map[string]string) {
		for rel, text := range files {
			p := filepath.Join(dir, rel)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		}
	}
	check := func(files map[string]string) {
		for rel, text := range files {
			b, err := os.ReadFile(filepath.Join(dir, rel))
			require.NoError(t, err, "%s: someone else's file, deleted", rel)
			require.Equal(t, text, string(b), rel)
		}
	}
	write(foreign)
	m := newMem(1<<20, 1<<20, 1<<20, 1<<20, 1<<20)
	b := open(t, m, dir, 2<<20+10) // two files: every round evicts
	for range 2 {
		readAll(t, b, m)
	}
	check(foreign)
	// Files put by hand where the cache keeps its own are not its files either.
	own := filepath.Dir(filepath.Dir(copyOf(t, dir, m, 4)))
	rel, err := filepath.Rel(dir, own)
	require.NoError(t, err)
	inside := map[string]string{
		filepath.Join(rel, "readme.tmp"):          "mine",
		filepath.Join(rel, ns, "keep-me.tmp"):     "mine too",
		filepath.Join(rel, ns, "draft.blk"):       "and this",
		filepath.Join(rel, ns, "9-0000000-1.blk"): "not the cache's pattern",
	}
	write(inside)
	readAll(t, b, m)
	require.NoError(t, b.Close())
	b = open(t, m, dir, 1<<20+10) // a smaller bound: evicts at open
	readAll(t, b, m)
	require.Positive(t, b.Stats().Evicted)
	check(foreign)
	check(inside)
}

// TestOldLayoutIgnored: a disk cache in the layout before the own directory (DIR/.lock,
// DIR/FINGERPRINT/NAME) is neither used nor deleted, and the log says so once.
func TestOldLayoutIgnored(t *testing.T) {
	dir := t.TempDir()
	m := newMem(4096, 8192)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".lock"), nil, 0o644))
	old := filepath.Join(dir, ns, fmt.Sprintf("0-%08x-4096.blk", crc32c.Checksum(m.files[0])))
	require.NoError(t, os.MkdirAll(filepath.Dir(old), 0o755))
	require.NoError(t, os.WriteFile(old, m.files[0], 0o644))
	b, logs := openLogged(t, m, dir, 1<<20)
	require.Contains(t, logs(), "older blockfs's disk cache")
	require.Contains(t, logs(), "remove them")
	readAll(t, b, m)
	require.EqualValues(t, 2, m.fills.Load(), "the old copy is not used: fetched")
	require.Zero(t, b.Stats().Hits)
	got, err := os.ReadFile(old)
	require.NoError(t, err, "the old copy is left alone")
	require.True(t, bytes.Equal(got, m.files[0]))
	require.FileExists(t, filepath.Join(dir, ".lock"))
}

// TestNotAFileInPlace: a FIFO, a symbolic link or a directory in a copy's place is a re-fetch
// at once with the store there, and the source's error at once without it: never a hang (a
// FIFO opened without O_NONBLOCK blocked the reader forever), never the link's target.
func TestNotAFileInPlace(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "canary")
	require.NoError(t, os.WriteFile(canary, []byte("root's secret"), 0o600))
	for _, kind := range []string{"fifo", "symlink", "symlink to a copy's bytes"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			m := newMem(1<<20+5, 4096)
			b := open(t, m, dir, 64<<20)
			readAll(t, b, m)
			p := copyOf(t, dir, m, 0)
			plant := func() {
				require.NoError(t, os.Remove(p))
				switch kind {
				case "fifo":
					require.NoError(t, syscall.Mkfifo(p, 0o600))
				case "symlink":
					require.NoError(t, os.Symlink(canary, p))
				default: // a file with the right bytes, elsewhere: still not followed
					good := filepath.Join(t.TempDir(), "good")
					require.NoError(t, os.WriteFile(good, m.files[0], 0o600))
					require.NoError(t, os.Symlink(good, p))
				}
			}
			// timed reads part and all of file 0 within 5 s, opening a stuck FIFO's other
			// end to let a hung reader go before failing.
			timed := func() error {
				errs := make(chan error, 1)
				go func() {
					got, err := read(b, 0, 3, 1<<20)
					if err == nil && !bytes.Equal(got, m.files[0][3:3+1<<20]) {
						err = fmt.Errorf("wrong bytes")
					}
					if err == nil {
						_, err = read(b, 0, 0, int64(len(m.files[0])))
					}
					errs <- err
				}()
				select {
				case err := <-errs:
					return err
				case <-time.After(5 * time.Second):
					if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
					<-errs
					t.Fatalf("a read of the copy hangs with a %s in its place", kind)
					return nil
				}
			}
			plant()
			hits, bad := b.Stats().Hits, b.Stats().Bad
			require.NoError(t, timed(), "the store there: fetched again")
			st, err := os.Lstat(p)
			require.NoError(t, err)
			require.True(t, st.Mode().IsRegular(), "a copy again: %v", st.Mode())
			require.Greater(t, b.Stats().Bad, bad)
			require.Equal(t, hits+1, b.Stats().Hits, "the second read is from the new copy")

			plant()
			m.fail.Store(true)
			require.ErrorIs(t, timed(), source.ErrUnavailable, "the store gone: its error")
			got, err := os.ReadFile(canary)
			require.NoError(t, err)
			require.Equal(t, "root's secret", string(got))
		})
	}
}

// TestSymlinksPlanted: a user who can write the --disk-cache directory plants symbolic links
// to a file only root may write at every name the cache ever created there; the cache writes
// through none of them (it wrote NAME.blk.tmp through one: 262,000 bytes over the target), and
// leaves them where they are.
func TestSymlinksPlanted(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o1777))
	canary := filepath.Join(t.TempDir(), "canary")
	require.NoError(t, os.WriteFile(canary, []byte("root's secret"), 0o600))
	m := newMem(4096, 5000, 1<<20)
	var planted []string
	plant := func(rel string) {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o777))
		require.NoError(t, os.Symlink(canary, p))
		planted = append(planted, p)
	}
	// Planted under a live cache (one started before deletes *.tmp at open), and kept for
	// the next.
	b := open(t, m, dir, 64<<20)
	plant("CACHEDIR.TAG")
	for id := range m.files {
		name := fmt.Sprintf("%d-%08x-%d.blk", id, crc32c.Checksum(m.files[id]), len(m.files[id]))
		plant(filepath.Join(ns, name))
		plant(filepath.Join(ns, name+".tmp"))
	}
	readAll(t, b, m)
	readAll(t, b, m)
	require.NoError(t, b.Close())
	if _, err := os.Lstat(filepath.Join(dir, ".lock")); err != nil {
		plant(".lock")
	}
	b = open(t, m, dir, 64<<20)
	readAll(t, b, m)
	require.NoError(t, b.Close())
	got, err := os.ReadFile(canary)
	require.NoError(t, err)
	require.Equal(t, "root's secret", string(got), "the target of a planted link was written")
	st, err := os.Stat(canary)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
	for _, p := range planted {
		st, err := os.Lstat(p)
		require.NoError(t, err, "someone else's link, deleted")
		require.Equal(t, fs.ModeSymlink, st.Mode().Type(), p)
	}
}

// TestLockSurvivesRemoval: after rm -rf of the directory under a live cache, a second cache of
// the same directory is still refused (it was let in: the lock file had gone with the
// directory); the first makes the directory again and keeps working.
func TestLockSurvivesRemoval(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dc")
	m := newMem(4096, 8192)
	a := open(t, m, dir, 1<<20)
	got, err := read(a, 0, 0, 4096)
	require.NoError(t, err)
	require.True(t, bytes.Equal(got, m.files[0]))
	require.NoError(t, os.RemoveAll(dir))
	_, err = Open(m, m, Options{Dir: dir, Size: 1 << 20, Namespace: ns, Logf: t.Logf})
	require.ErrorIs(t, err, ErrBusy, "a second cache while the first lives")
	readAll(t, a, m) // file 0 is gone: fetched again, and kept with file 1
	copyOf(t, dir, m, 0)
	copyOf(t, dir, m, 1)
	_, err = Open(m, m, Options{Dir: dir, Size: 1 << 20, Namespace: ns, Logf: t.Logf})
	require.ErrorIs(t, err, ErrBusy, "the directory made again: still refused")
	require.NoError(t, a.Close())
	m.fail.Store(true)
	b := open(t, m, dir, 1<<20)
	readAll(t, b, m)
	require.EqualValues(t, 2, b.Stats().Hits, "both copies from disk")
}
