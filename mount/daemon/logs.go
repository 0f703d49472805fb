package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A --daemon mount has no terminal: without --log its log lines (why a read failed, what a
// refusal was) went nowhere. It now writes them to a log of its own in this user's private
// log directory, a sibling of the registry's (LogDir), named in info.json ("log"): at most
// logLimit bytes, then moved to NAME.1 (one older file kept), so a daemon's log holds at most
// twice that. A new daemon's log removes the oldest beyond keptLogs files: a log outlives its
// daemon, for whoever wants to know why it failed, but not forever.
const (
	logLimit = 1 << 20
	keptLogs = 32
)

// LogDir returns the directory of the daemons' logs: /run/blockfs/logs for root, else beside
// RegistryDir (/run/user/UID/blockfs-logs or /tmp/blockfs-logs-UID).
func LogDir() string {
	reg := RegistryDir()
	base := filepath.Base(reg)
	name := strings.Replace(base, "mounts", "logs", 1)
	if name == base {
		name += "-logs" // never the registry itself
	}
	return filepath.Join(filepath.Dir(reg), name)
}

// DaemonLog makes LogDir (private to this user; refusing one that is not) and returns the
// path of this daemon's log there, after removing the oldest logs beyond keptLogs.
func DaemonLog() (string, error) {
	dir := LogDir()
	if err := privateDir(dir); err != nil {
		return "", err
	}
	pruneLogs(dir, keptLogs-1)
	return DaemonLogOf(os.Getpid()), nil
}

// DaemonLogOf is the log a daemon of pid (in this pid namespace) keeps when not given --log.
func DaemonLogOf(pid int) string {
	return filepath.Join(LogDir(), fmt.Sprintf("%d-%d.log", pidNS(), pid))
}

// pruneLogs removes the oldest daemon logs of dir (NS-PID.log and .log.1, by modification
// time) beyond keep, but never one of a daemon alive in this pid namespace.
func pruneLogs(dir string, keep int) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type file struct {
		name string
		mod  int64
	}
	var files []file
	for _, e := range ents {
		var ns uint64
		var pid int
		base := strings.TrimSuffix(e.Name(), ".1")
		if _, err := fmt.Sscanf(base, "%d-%d.log", &ns, &pid); err != nil || base != fmt.Sprintf("%d-%d.log", ns, pid) {
			continue // not a daemon's log
		}
		if ns == pidNS() && startTime(pid) != 0 { // alive (or its pid reused: kept a while more)
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			files = append(files, file{e.Name(), info.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return int(min(1, max(-1, b.mod-a.mod))) })
	for _, f := range files[min(keep, len(files)):] {
		os.Remove(filepath.Join(dir, f.name))
	}
}

// Log is a log file that holds at most limit bytes: a write that would pass it moves the file
// to PATH.1 (replacing the one there) and starts a new one.
type Log struct {
	mu    sync.Mutex
	path  string
	limit int64
	f     *os.File // guarded by mu
	size  int64    // of f (guarded by mu)
}

// OpenLog opens the log at path, appending (no symlink followed, mode 0600); limit <= 0 for
// no limit.
func OpenLog(path string, limit int64) (*Log, error) {
	l := &Log{path: path, limit: limit}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

// OpenDaemonLog opens DaemonLog's path with the daemons' limit.
func OpenDaemonLog(path string) (*Log, error) { return OpenLog(path, logLimit) }

func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", l.path)
	}
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Write implements io.Writer.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, os.ErrClosed
	}
	if l.limit > 0 && l.size > 0 && l.size+int64(len(p)) > l.limit {
		// The full file becomes path.1 (gone, removed by hand: a new one all the same), then a
		// new one is opened; where either fails (a folder that cannot be written, descriptors
		// run out) lines go on to the file open now, and the next try is a limit's worth on.
		old, size := l.f, l.size
		err := os.Rename(l.path, l.path+".1")
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			err = l.open()
		}
		if err == nil {
			old.Close()
		} else {
			l.f, l.size = old, size-l.limit
		}
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// Stderr makes the process's standard error the log's file as it is now, so that what the Go
// runtime writes there (a panic's stack) is kept with the log lines.
func (l *Log) Stderr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return os.ErrClosed
	}
	return unix.Dup2(int(l.f.Fd()), 2)
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
