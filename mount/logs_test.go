package mount

import (
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
	for i := 0; i < 10; i++ {
		p := filepath.Join(dir, string(rune('a'+i))+".log")
		require.NoError(t, os.WriteFile(p, nil, 0o600))
		at := now.Add(time.Duration(i) * time.Minute) // j.log is the newest
		require.NoError(t, os.Chtimes(p, at, at))
	}
	pruneLogs(dir, 3)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"h.log", "i.log", "j.log"}, names)
}

func TestLogDirBesideRegistry(t *testing.T) {
	reg := RegistryDir()
	assert.Equal(t, filepath.Dir(reg), filepath.Dir(LogDir()))
	assert.Contains(t, filepath.Base(LogDir()), "logs")
}
