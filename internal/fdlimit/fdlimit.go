// Package fdlimit refuses to start blockfs with too few file descriptors, before any other
// package's initialization can fail on it: go-fuse's splice package creates a pipe in its init
// and panics (a trace, exit 2) when there is no descriptor for it. The command imports this
// package first; Go initializes it before go-fuse (its import path sorts first and it depends on
// neither), so the user gets one line and exit code 1 instead.
package fdlimit

import (
	"fmt"
	"os"
	"syscall"
)

// Min is the least open-file limit blockfs starts with: the daemon holds /dev/fuse, its epoll
// and log descriptors, and one descriptor per block read in flight (up to 64 requests and the
// readahead workers).
const Min = 64

func init() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= Min {
		return
	}
	// Go raises the soft limit to the hard one at startup, so Cur is all there is.
	fmt.Fprintf(os.Stderr, "blockfs: the open-file limit is %d (ulimit -n); blockfs needs at least %d: raise it (ulimit -n 1024) and run again\n", lim.Cur, Min)
	os.Exit(1)
}

// Current returns the process's open-file limit (the soft one, which Go has raised to the
// hard one at startup), or Min when it cannot be read.
func Current() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return Min
	}
	return lim.Cur
}

// Share returns a part of the open-file limit for one use that must never starve the rest of
// the process (connections a server accepts): one in div of the limit, within [lo, hi].
func Share(div, lo, hi uint64) int {
	return int(min(hi, max(lo, Current()/div)))
}
