package diskcache

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOwnDirChecked: whatever stands where the cache keeps its files (DIR/blockfs-cache-UID)
// and is not a directory it made for this user is refused in one line, and left as it is; an
// empty directory of the user's (a crash between making it and marking it) is taken.
func TestOwnDirChecked(t *testing.T) {
	m := newMem(4096)
	elsewhere := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(elsewhere, "x"), []byte("x"), 0o600))
	for _, c := range []struct {
		name  string
		plant func(sub string)
		why   string
	}{
		{"a symbolic link", func(sub string) { require.NoError(t, os.Symlink(elsewhere, sub)) }, "is a symbolic link"},
		{"a file", func(sub string) { require.NoError(t, os.WriteFile(sub, nil, 0o600)) }, "is not a directory"},
		{"writable by others", func(sub string) {
			require.NoError(t, os.Mkdir(sub, 0o700))
			require.NoError(t, os.Chmod(sub, 0o777))
		}, "is writable by others (mode 0777)"},
		{"files but no marker", func(sub string) {
			require.NoError(t, os.Mkdir(sub, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(sub, "x"), nil, 0o600))
		}, "has files but no blockfs CACHEDIR.TAG"},
		{"another user's", func(sub string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to make a directory of another user's")
			}
			require.NoError(t, os.Mkdir(sub, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(sub, markerName), []byte(markerText), 0o600))
			require.NoError(t, os.Chown(sub, 65534, 65534))
		}, "belongs to uid 65534, not to this user (uid 0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sub := subDir(dir)
			c.plant(sub)
			before, err := os.Lstat(sub)
			require.NoError(t, err)
			_, err = Open(m, m, Options{Dir: dir, Size: 1 << 20, Namespace: ns, Logf: t.Logf})
			require.ErrorIs(t, err, ErrNotOurs)
			require.ErrorContains(t, err, sub+" "+c.why)
			require.ErrorContains(t, err, "remove it, or use a --disk-cache directory that only you can write")
			require.NotContains(t, err.Error(), "\n")
			after, err := os.Lstat(sub)
			require.NoError(t, err)
			require.Equal(t, before.Mode(), after.Mode(), "left as it is")
			names, _ := os.ReadDir(elsewhere)
			require.Len(t, names, 1, "nothing made through the link")
		})
	}
	t.Run("empty: taken", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(subDir(dir), 0o755))
		b := open(t, m, dir, 1<<20)
		readAll(t, b, m)
		st, err := os.Stat(subDir(dir))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
		marker, err := os.ReadFile(filepath.Join(subDir(dir), markerName))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(marker), markerSig))
	})
}

// TestLockNameSquatted: another user's process holding the lock's name (it can bind any
// name) does not keep the cache out: the directory's own lock guards it, and the log says so.
func TestLockNameSquatted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	python := "/usr/bin/python3" // a system one: another user may not run the tester's own
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 to hold the name")
	}
	dir := t.TempDir()
	name := lockKey(subDir(dir))
	squat := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c",
		"import socket, sys, time\ns = socket.socket(socket.AF_UNIX)\ns.bind('\\0' + sys.argv[1])\ns.listen()\nprint('held', flush=True)\ntime.sleep(120)",
		strings.TrimPrefix(name, "@"))
	out, err := squat.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, squat.Start())
	t.Cleanup(func() {
		_ = squat.Process.Kill()
		_ = squat.Wait()
	})
	line := make([]byte, 5)
	_, err = io.ReadFull(out, line) // a pipe may return "held" and "\n" in two reads
	require.NoError(t, err)
	require.Equal(t, "held\n", string(line))

	m := newMem(4096)
	b, logs := openLogged(t, m, dir, 1<<20)
	require.Contains(t, logs(), "a process of uid 65534 holds its lock name")
	readAll(t, b, m)
	_, err = Open(m, m, Options{Dir: dir, Size: 1 << 20, Namespace: ns, Logf: t.Logf})
	require.ErrorIs(t, err, ErrBusy, "the flock still refuses a second cache")
}
