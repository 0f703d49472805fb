package fuseread

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// blocked opens a FIFO with no writer: a system call that waits, as one to a stopped FUSE
// daemon does, until the test ends (it opens the FIFO's other end).
func blocked(t *testing.T) func() error {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	t.Cleanup(func() {
		if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			unix.Close(fd)
		}
	})
	return func() error {
		fd, err := unix.Open(fifo, unix.O_RDONLY, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
}

// TestDoBounds: a call that does not return costs its timeout, or less once ctx is done; one
// that returns gives its error.
func TestDoBounds(t *testing.T) {
	start := time.Now()
	err := Do(context.Background(), 200*time.Millisecond, blocked(t))
	assert.ErrorIs(t, err, ErrTimeout)
	assert.Less(t, time.Since(start), 2*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	assert.ErrorIs(t, Do(ctx, time.Minute, blocked(t)), context.Canceled)
	assert.Less(t, time.Since(start), 2*time.Second)

	want := errors.New("x")
	assert.Equal(t, want, Do(context.Background(), time.Second, func() error { return want }))
}

// TestDoBlocksSignals: the thread of a call blocks every signal, so a signal to the process is
// never handed to a thread that waits in the kernel.
func TestDoBlocksSignals(t *testing.T) {
	var mask unix.Sigset_t
	require.NoError(t, Do(context.Background(), time.Second, func() error {
		return unix.PthreadSigmask(unix.SIG_BLOCK, nil, &mask)
	}))
	for sig := 1; sig <= 31; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		assert.NotZero(t, mask.Val[(sig-1)/64]&(1<<uint((sig-1)%64)), "signal %d blocked", sig)
	}
}

// TestReaderSticks: a Reader whose read did not answer fails every later read at once.
func TestReaderSticks(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // keeps the FIFO open for writing, writes nothing
	require.NoError(t, err)
	defer w.Close()
	fd, err := unix.Open(fifo, unix.O_RDONLY, 0)
	require.NoError(t, err)
	r := NewReader(context.Background(), os.NewFile(uintptr(fd), fifo), 100*time.Millisecond)
	_, err = r.Read(make([]byte, 10))
	assert.ErrorIs(t, err, ErrTimeout)
	start := time.Now()
	_, err = r.Read(make([]byte, 10))
	assert.ErrorIs(t, err, ErrTimeout)
	assert.Less(t, time.Since(start), 50*time.Millisecond)
	w.Write([]byte("x")) // lets the stuck read end
}

// TestOpenLateIsClosed: an open that answers after Open has given up is closed by the thread
// that made it, at once, not left to the file's finalizer (a close on an ordinary thread, which
// on FUSE asks the daemon too).
func TestOpenLateIsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late")
	require.NoError(t, os.WriteFile(path, []byte("x"), 0o600))
	opened := make(chan struct{})
	saved := openFile
	openFile = func(p string, limit int64) (*os.File, int64, error) {
		time.Sleep(300 * time.Millisecond)
		defer close(opened)
		return saved(p, limit)
	}
	t.Cleanup(func() { openFile = saved })

	_, err := Open(context.Background(), path, 50*time.Millisecond)
	require.ErrorIs(t, err, ErrTimeout)
	<-opened
	assert.Eventually(t, func() bool { return !holds(t, path) }, 2*time.Second, 10*time.Millisecond,
		"the late file is closed without waiting for a garbage collection")
}

// holds reports whether this process has a descriptor open on path.
func holds(t *testing.T, path string) bool {
	fds, err := filepath.Glob("/proc/self/fd/*")
	require.NoError(t, err)
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && l == path {
			return true
		}
	}
	return false
}
