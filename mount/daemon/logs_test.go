package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.log")
	l, err := OpenLog(path, 100)
	require.NoError(t, err)
	line := strings.Repeat("x", 39) + "\n"
	for i := 0; i < 10; i++ {
		_, err := l.Write([]byte(line))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	cur, err := os.ReadFile(path)
	require.NoError(t, err)
	old, err := os.ReadFile(path + ".1")
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat(line, 2), string(cur), "10 lines of 40 bytes at 100 a file: the last 2 here")
	assert.Equal(t, strings.Repeat(line, 2), string(old), "and the 2 before in .1")
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// A symlink in the log's place is not followed.
	target := filepath.Join(t.TempDir(), "elsewhere")
	link := filepath.Join(t.TempDir(), "link.log")
	require.NoError(t, os.Symlink(target, link))
	_, err = OpenLog(link, 100)
	assert.Error(t, err)
	assert.NoFileExists(t, target)
}

func TestPruneLogs(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	write := func(name string, age time.Duration) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, nil, 0o600))
		require.NoError(t, os.Chtimes(p, now.Add(-age), now.Add(-age)))
	}
	for i := 0; i < 10; i++ {
		write(fmt.Sprintf("1-%d.log", 100+i), time.Duration(10-i)*time.Minute) // 1-109.log the newest
	}
	write("1-100.log.1", time.Hour)
	write("notes.txt", time.Hour)                                      // not a daemon's log
	write(fmt.Sprintf("%d-%d.log", pidNS(), os.Getpid()), 2*time.Hour) // a live daemon's, the oldest
	pruneLogs(dir, 3)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"1-107.log", "1-108.log", "1-109.log", "notes.txt", fmt.Sprintf("%d-%d.log", pidNS(), os.Getpid())}, names)
}

func TestLogDirBesideRegistry(t *testing.T) {
	reg := RegistryDir()
	assert.Equal(t, filepath.Dir(reg), filepath.Dir(LogDir()))
	assert.Contains(t, filepath.Base(LogDir()), "logs")
	defer func(f func() []string) { registryDirs = f }(registryDirs)
	registryDirs = func() []string { return []string{"/tmp/reg"} }
	assert.NotEqual(t, RegistryDir(), LogDir(), "never the registry itself")
}

func TestLogRotatesWhenRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.log")
	l, err := OpenLog(path, 50)
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Write([]byte(strings.Repeat("x", 40) + "\n"))
	require.NoError(t, err)
	require.NoError(t, os.Remove(path)) // pruned, or removed by hand
	_, err = l.Write([]byte(strings.Repeat("y", 40) + "\n"))
	require.NoError(t, err, "a new file all the same")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("y", 40)+"\n", string(b))
}

// TestLogRotationFails: where the full log cannot be renamed (a folder of files in the way of
// its .1) lines go on to the file open now, none lost, and the rotation is tried again a
// limit's worth later, not at every line.
func TestLogRotationFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.log")
	require.NoError(t, os.MkdirAll(filepath.Join(path+".1", "in-the-way"), 0o700))
	l, err := OpenLog(path, 100)
	require.NoError(t, err)
	defer l.Close()
	line := strings.Repeat("z", 39) + "\n"
	for range 5 {
		_, err := l.Write([]byte(line))
		require.NoError(t, err)
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat(line, 5), string(b), "every line kept in the file open")
	require.NoError(t, os.RemoveAll(path+".1"))
	for range 2 {
		_, err := l.Write([]byte(line))
		require.NoError(t, err)
	}
	old, err := os.ReadFile(path + ".1")
	require.NoError(t, err, "rotated a limit's worth on, once the way is clear")
	assert.Equal(t, strings.Repeat(line, 5), string(old), "the five lines kept meanwhile")
}
