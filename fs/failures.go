package fs

import (
	"fmt"
	"log"
	"sync"
	"syscall"
	"time"
)

// A read that fails reaches the reader as an errno (EIO, mostly), which says nothing of why.
// The reason goes to the daemon's log, which a --daemon mount or blockfs.Mount may discard, so
// the mount also keeps it where a trainer looks: stats.json counts its failed reads by kind
// ("read_errors_by_kind", and the Prometheus endpoint by the same kinds) and keeps the last
// lastErrors distinct failures ("last_errors": file, offset, kind, reason, count, first and
// latest time), which blockfs stats shows and the Python reader quotes in its OSError.

// lastErrors is how many distinct failures (by file and reason) stats.json keeps.
const lastErrors = 16

// maxReason bounds a failure's reason in stats.json (the cause may quote a long path).
const maxReason = 1024

// ErrorKinds are the kinds a failed read is counted by (classify's), each always present in
// read_errors_by_kind: "interrupted" (the reader gave up: EINTR), "missing" (ENOENT), "fds"
// and "memory" (the daemon ran out), "changed" (a dataset file changed under the mount),
// "gone" (a dataset file deleted), "corrupt" (bad checksums, short files), "denied" and
// "unavailable" (the object store), "disk" (EIO from the disk), "other".
var ErrorKinds = []string{"interrupted", "missing", "fds", "memory", "changed", "gone", "corrupt", "denied", "unavailable", "disk", "other"}

// ErrorStats is one distinct failure: reads of File that failed for Reason.
type ErrorStats struct {
	File   string `json:"file"`   // relative to the mount
	Offset int64  `json:"offset"` // where the latest such read began (-1: an open)
	Kind   string `json:"kind"`   // one of ErrorKinds
	Reason string `json:"reason"` // the log line's words and the cause
	Count  uint64 `json:"count"`  // reads that failed so
	First  string `json:"first"`  // RFC 3339, UTC, of the first
	Latest string `json:"latest"` // and of the latest
}

// failures is a mount's record of failed reads.
type failures struct {
	mu     sync.Mutex
	byKind map[string]uint64 // guarded by mu
	last   []ErrorStats      // the most recent last (guarded by mu)
}

// add records a failed read of file at off, of kind; reason "" counts it only.
func (f *failures) add(file string, off int64, kind, reason string) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if len(reason) > maxReason {
		reason = reason[:maxReason] + "..."
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byKind == nil {
		f.byKind = make(map[string]uint64, len(ErrorKinds))
	}
	f.byKind[kind]++
	if reason == "" {
		return
	}
	for i, e := range f.last {
		if e.File == file && e.Reason == reason {
			e.Count++
			e.Offset, e.Latest = off, now
			f.last = append(append(f.last[:i:i], f.last[i+1:]...), e)
			return
		}
	}
	if len(f.last) == lastErrors {
		f.last = append(f.last[:0:0], f.last[1:]...)
	}
	f.last = append(f.last, ErrorStats{File: file, Offset: off, Kind: kind, Reason: reason, Count: 1, First: now, Latest: now})
}

// snapshot returns the counts by kind (every kind, 0 where none) and the failures kept.
func (f *failures) snapshot() (map[string]uint64, []ErrorStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kinds := make(map[string]uint64, len(ErrorKinds))
	for _, k := range ErrorKinds {
		kinds[k] = f.byKind[k]
	}
	return kinds, append([]ErrorStats{}, f.last...) // [] before any, not null
}

// readFailed answers a failed read of file (relative to the mount) at off: it counts it, logs
// the reason and keeps it for stats.json, and returns the errno for the reader and a line
// saying what failed and why (the shared-memory path's reply carries it). An error that is
// the end of the file is no failure (errno 0), unless short: a read that had to fill its
// whole range (EIO).
func (m *mount) readFailed(err error, file string, off int64, short bool) (syscall.Errno, string) {
	what := fmt.Sprintf("read %s at %d", file, off)
	errno, kind, why := classify(err)
	if errno == 0 {
		if !short { // the end of the file: no failure (the reply is short)
			return 0, what + ": end of file"
		}
		errno, kind, why = syscall.EIO, "other", "the file ended before the read did"
	}
	reason := ""
	if why != "" {
		reason = fmt.Sprintf("%s: %v", why, err)
		log.Printf("blockfs: %s: %s", what, reason)
		if m.opt.OnFailure != nil {
			m.opt.OnFailure(err, what+": "+reason)
		}
	}
	m.failed.add(file, off, kind, reason)
	if reason == "" {
		return errno, fmt.Sprintf("%s: %v", what, err)
	}
	return errno, what + ": " + reason
}
