// Package fuseread touches files that a FUSE daemon serves, which may never answer: a daemon
// that is stopped (SIGSTOP), hung or deadlocked leaves a request to it waiting in the kernel,
// and the thread that made it waits there too. Such a wait must cost the caller a bounded
// time, and never its signals.
//
// Each call runs on an OS thread of its own with every signal blocked, and the caller waits
// for it at most a timeout, or until its context is done; a call that does not return in time
// is left where it is, with its thread. Blocking signals there matters: a signal sent to the
// process (Ctrl-C, SIGTERM) may be handed by the kernel to any thread that does not block it,
// and one handed to the waiting thread interrupts nothing (FUSE then waits on, killable only)
// and stays pending there, so the Go runtime never sees it and the process ignores it. The
// goroutine ends still locked to its thread, so the thread, with its mask, ends with it.
//
// Only plain system calls belong in a call (unix.Open, os.Lstat, a file from
// internal/userfile): os.Open registers a file with the runtime's poller, and on FUSE that
// epoll_ctl is itself a request, made where the scheduler does not count a system call; a
// garbage collection would then wait for it, and the whole process with it.
//
// A process exits even with such a thread, as long as the daemon has not read the request
// (a stopped one has not): exit kills the thread, and the kernel drops the request. A request
// a deadlocked daemon has read holds its thread, and the process's exit, until the daemon
// answers or its connection is aborted (/sys/fs/fuse/connections/N/abort): the kernel allows
// nothing else.
package fuseread

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/userfile"
)

// ErrTimeout is returned when a call has not returned within its timeout.
var ErrTimeout = errors.New("no answer")

// Do runs fn on a thread of its own that blocks every signal and returns its error, or
// ErrTimeout once timeout has passed, or ctx.Err() once ctx is done, whichever comes first.
// fn must not touch memory the caller reads after Do returns without its answer.
func Do(ctx context.Context, timeout time.Duration, fn func() error) error {
	done := make(chan error, 1) // a late answer never blocks its goroutine
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		var all unix.Sigset_t
		for i := range all.Val {
			all.Val[i] = ^all.Val[i]
		}
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, nil); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return ErrTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Reader reads a file through Do, each read bounded by the timeout. Once a read has failed to
// answer, every later read fails at once with the same error.
type Reader struct {
	ctx     context.Context
	f       *os.File // opened without the runtime's poller (internal/userfile)
	timeout time.Duration
	err     error // sticky: a read that did not answer
}

// NewReader returns a Reader of f, which must have been opened without the poller.
func NewReader(ctx context.Context, f *os.File, timeout time.Duration) *Reader {
	return &Reader{ctx: ctx, f: f, timeout: timeout}
}

// Read reads into p, through a buffer of its own: a read that does not answer in time may
// still write to it later.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	var n int
	buf := make([]byte, len(p))
	err := Do(r.ctx, r.timeout, func() error {
		var err error
		n, err = r.f.Read(buf)
		return err
	})
	if errors.Is(err, ErrTimeout) || (err != nil && r.ctx.Err() != nil) {
		r.err = err
		return 0, err
	}
	copy(p, buf[:n])
	if err == io.EOF {
		return n, io.EOF
	}
	return n, err
}

// Close closes the file through Do: on FUSE, a close asks the daemon too (FLUSH).
func (r *Reader) Close() error {
	if r.err != nil {
		return r.err // the thread still reading holds the file; the process's exit closes it
	}
	return Do(r.ctx, r.timeout, r.f.Close)
}

// openFile opens a file for Open: userfile.Open, a variable for tests.
var openFile = userfile.Open

// Open opens the regular file at path (internal/userfile.Open, no size limit) through Do and
// returns a Reader of it. An open that answers after Do has given up is closed where it was
// made, on its signal-blocked thread: on FUSE a close asks the daemon too (FLUSH), and the
// file's finalizer would make that request later on an ordinary thread, which a daemon that
// does not answer would then hold.
func Open(ctx context.Context, path string, timeout time.Duration) (*Reader, error) {
	var (
		mu     sync.Mutex
		f      *os.File // the file opened, once handed over
		gaveUp bool     // Do returned without it
	)
	err := Do(ctx, timeout, func() error {
		g, _, err := openFile(path, -1)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if gaveUp {
			return g.Close() // on this thread: it blocks every signal and may wait
		}
		f = g
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if f == nil {
		gaveUp = true
		if err == nil {
			err = ErrTimeout // (never: fn returned nil only after handing f over)
		}
		return nil, err
	}
	// Opened: even when Do gave up a moment after, the file is the caller's now.
	return NewReader(ctx, f, timeout), nil
}

// ReadFile reads the regular file at path whole (internal/userfile.ReadFile: at most limit
// bytes) through Do.
func ReadFile(ctx context.Context, path string, limit int64, timeout time.Duration) ([]byte, error) {
	var b []byte
	err := Do(ctx, timeout, func() error {
		var err error
		b, err = userfile.ReadFile(path, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}
