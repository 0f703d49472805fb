package userfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusals: a FIFO (with no writer: opening it for reading would wait forever), /dev/zero
// (it would never end), a directory and a file over the limit are each refused at once, saying
// what they are; a regular file within the limit is read whole.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, make([]byte, 5000), 0o644))
	for _, c := range []struct {
		path string
		kind error
		want string
	}{
		{fifo, ErrNotRegular, fifo + ": a named pipe (FIFO), not a regular file"},
		{"/dev/zero", ErrNotRegular, "/dev/zero: a character device, not a regular file"},
		{dir, ErrNotRegular, "a directory, not a regular file"},
		{big, ErrTooLarge, "4.9 KiB, more than the limit of 4.0 KiB"},
	} {
		start := time.Now()
		_, err := ReadFile(c.path, 4096)
		assert.Less(t, time.Since(start), time.Second, c.path)
		assert.ErrorIs(t, err, c.kind, c.path)
		assert.ErrorContains(t, err, c.want)
	}
	_, err := ReadFile(filepath.Join(dir, "missing"), 10)
	assert.ErrorIs(t, err, os.ErrNotExist)

	ok := filepath.Join(dir, "ok")
	require.NoError(t, os.WriteFile(ok, []byte("hello"), 0o644))
	got, err := ReadFile(ok, 5)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
}

// TestGrowing: a file that holds more than the limit by the time it is read (it grew after the
// open) is refused while it is read, not read on without end.
func TestGrowing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(p, []byte("0123"), 0o644))
	f, size, err := Open(p, 10)
	require.NoError(t, err)
	defer f.Close()
	assert.EqualValues(t, 4, size)
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("x", 100)), 0o644))
	_, err = io.ReadAll(Reader(f, 10))
	require.ErrorIs(t, err, ErrTooLarge)
	assert.ErrorContains(t, err, "grew past the limit of 10 bytes while it was read")
	var pe *os.PathError
	assert.True(t, errors.As(err, &pe))
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		dir, path string
		want      bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/b/c", true},
		{"/a/b", "/a/b/../b/c", true},
		{"/a/b", "/a/bc", false},
		{"/a/b", "/a", false},
		{"/a/b", "/a/b/../c", false},
		{"/a/b", "/a/b/..c", true},
		{"/", "/x", true},
		{"/a/b", "c", false},
	} {
		assert.Equal(t, c.want, Within(c.dir, c.path), "Within(%q, %q)", c.dir, c.path)
	}
}

// TestCreate: a file to write is made 0600 or truncated; a symbolic link there is refused and
// what it points at left as it was; a FIFO is refused at once, not waited on.
func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "new.prof")
	f, err := Create(p)
	require.NoError(t, err)
	_, err = f.WriteString("profile")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	f, err = Create(p)
	require.NoError(t, err, "an existing file")
	require.NoError(t, f.Close())
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Empty(t, b, "made anew")

	target := filepath.Join(dir, "precious")
	require.NoError(t, os.WriteFile(target, []byte("keep me"), 0o644))
	link := filepath.Join(dir, "link.prof")
	require.NoError(t, os.Symlink(target, link))
	_, err = Create(link)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.Contains(t, err.Error(), "symbolic link")
	b, err = os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(b), "the link's target is untouched")

	fifo := filepath.Join(dir, "fifo.prof")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() { _, err := Create(fifo); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err, "a FIFO")
	case <-time.After(5 * time.Second):
		t.Fatal("Create waited on a FIFO")
	}
}
