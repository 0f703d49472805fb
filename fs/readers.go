package fs

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/blockfs/blockfs/view"
)

// Where the time of reads goes (docs/USAGE.md, "Is the trainer waiting for data?"). Every FUSE
// read is timed, and so is the part of it spent waiting for pages to load (view.Waits): a
// read served from memory waits 0. The waits are the data stall: what a reader would not have
// waited had the data been in memory. Each open file is a reader, with the process that opened
// it, its position and its counters; stats.json lists them, and the mount's totals.

// reader is one open file's counters. Immutable fields are set at Open; the rest are atomic.
type reader struct {
	id     uint64
	file   string // the file's path in the mount
	pid    uint32 // the process that opened it
	size   int64
	data   bool // an epoch's records (not a sidecar): it reads a window of the order
	opened time.Time

	first  atomic.Int64 // unix ns of the first read; 0 before it
	last   atomic.Int64 // unix ns of the end of the latest read
	posMu  sync.Mutex
	pos    int64 // where the read that started last ended (guarded by posMu)
	posAt  int64 // unix ns that read started (guarded by posMu)
	bytes  atomic.Uint64
	reads  atomic.Uint64
	waited atomic.Uint64 // reads that waited for a load
	waitNS atomic.Int64  // time reads waited for loads
	readNS atomic.Int64  // time reads took in the daemon
}

// readTimes are a mount's read totals, over every reader past and present.
type readTimes struct {
	waited   atomic.Uint64 // reads that waited for a load
	waitNS   atomic.Int64  // time reads waited (the stall)
	readNS   atomic.Int64  // time reads took
	activeNS atomic.Int64  // closed readers' time from first read to close (added under mu)

	mu      sync.Mutex
	next    uint64
	readers map[uint64]*reader // open (guarded by mu)
}

// open registers a reader of file (data: of an epoch's records), opened by the process of
// ctx's caller.
func (t *readTimes) open(ctx context.Context, file string, size int64, data bool) *reader {
	var pid uint32
	if c, ok := fuse.FromContext(ctx); ok && c != nil {
		pid = tgid(c.Pid)
	}
	return t.openBy(pid, file, size, data)
}

// openBy registers a reader of file (data: of an epoch's records), opened by process pid (the
// shared-memory path's client).
func (t *readTimes) openBy(pid uint32, file string, size int64, data bool) *reader {
	r := &reader{file: file, size: size, data: data, opened: time.Now(), pid: pid}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.readers == nil {
		t.readers = make(map[uint64]*reader)
	}
	t.next++
	r.id = t.next
	t.readers[r.id] = r
	return r
}

// close forgets r, keeping its active time in the totals: under the lock, so that a snapshot
// counts a reader's time once, open or closed (reader_seconds never goes back).
func (t *readTimes) close(r *reader) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.readers, r.id)
	if first := r.first.Load(); first != 0 {
		t.activeNS.Add(time.Now().UnixNano() - first)
	}
}

// read accounts one read of r: n bytes ending at end, that took d and waited w of it.
// position records where a read that started at ns ended, unless a read that started later
// has: the kernel's readahead sends a file's reads concurrently and they end in any order, so
// the read that ended last may be an earlier part of the file (a sequential reader read to its
// end was shown at 85%).
func (r *reader) position(ns, end int64) {
	r.posMu.Lock()
	defer r.posMu.Unlock()
	if ns >= r.posAt {
		r.pos, r.posAt = end, ns
	}
}

// Position returns where the read that started last ended.
func (r *reader) Position() int64 {
	r.posMu.Lock()
	defer r.posMu.Unlock()
	return r.pos
}

func (t *readTimes) read(r *reader, start time.Time, d, w time.Duration, end int64, n int) {
	if r != nil {
		r.first.CompareAndSwap(0, start.UnixNano())
		r.last.Store(start.Add(d).UnixNano())
		r.position(start.UnixNano(), end)
		r.bytes.Add(uint64(n))
		r.reads.Add(1)
		r.readNS.Add(int64(d))
		if w > 0 {
			r.waited.Add(1)
			r.waitNS.Add(int64(w))
		}
	}
	t.readNS.Add(int64(d))
	if w > 0 {
		t.waited.Add(1)
		t.waitNS.Add(int64(w))
	}
}

// places returns where the open readers of epochs' records that read in the last within are:
// for each file, their positions (Position), each reader at its own place of the order.
func (t *readTimes) places(within time.Duration) map[string][]int64 {
	since := time.Now().Add(-within).UnixNano()
	t.mu.Lock()
	rs := make([]*reader, 0, len(t.readers))
	for _, r := range t.readers {
		if r.data && r.last.Load() >= since {
			rs = append(rs, r)
		}
	}
	t.mu.Unlock()
	at := make(map[string][]int64)
	for _, r := range rs {
		at[r.file] = append(at[r.file], r.Position())
	}
	return at
}

// ReaderStats is one open file's line in stats.json's "readers".
type ReaderStats struct {
	ID          uint64  `json:"id"`             // the mount's number for it, in the order opened
	File        string  `json:"file"`           // its path in the mount
	PID         uint32  `json:"pid"`            // the process that opened it
	Size        int64   `json:"size"`           // bytes
	Position    int64   `json:"position"`       // where the read that started last ended
	Bytes       uint64  `json:"bytes"`          // bytes read
	Reads       uint64  `json:"reads"`          // FUSE reads
	ReadsWaited uint64  `json:"reads_waited"`   // reads that waited for a load
	WaitSeconds float64 `json:"wait_seconds"`   // time its reads waited for loads: its data stall
	ReadSeconds float64 `json:"read_seconds"`   // time its reads took in the daemon
	OpenSeconds float64 `json:"open_seconds"`   // since it was opened
	Active      float64 `json:"active_seconds"` // since its first read
	Stall       float64 `json:"stall"`          // wait_seconds / active_seconds (0 before a read)
}

// snapshot returns the open readers' lines, in the order they were opened, and the closed
// readers' active time, at now, taken together.
func (t *readTimes) snapshot() (now time.Time, out []ReaderStats, closedNS int64) {
	t.mu.Lock()
	now = time.Now()
	closedNS = t.activeNS.Load()
	rs := make([]*reader, 0, len(t.readers))
	for _, r := range t.readers {
		rs = append(rs, r)
	}
	t.mu.Unlock()
	sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })
	out = make([]ReaderStats, len(rs))
	for i, r := range rs {
		s := ReaderStats{ID: r.id, File: r.file, PID: r.pid, Size: r.size, Position: r.Position(), Bytes: r.bytes.Load(),
			Reads: r.reads.Load(), ReadsWaited: r.waited.Load(), WaitSeconds: seconds(r.waitNS.Load()),
			ReadSeconds: seconds(r.readNS.Load()), OpenSeconds: now.Sub(r.opened).Seconds()}
		if first := r.first.Load(); first != 0 {
			s.Active = seconds(now.UnixNano() - first)
			if s.Active > 0 {
				s.Stall = min(1, s.WaitSeconds/s.Active)
			}
		}
		out[i] = s
	}
	return now, out, closedNS
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// tgid returns the process of thread tid (FUSE names the calling thread), or tid when /proc
// cannot say.
func tgid(tid uint32) uint32 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return tid
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
				return uint32(n)
			}
		}
	}
	return tid
}

// timedRead runs read with the Waits it is to count its waits in, and returns how long it took
// and waited.
func timedRead(read func(w *view.Waits)) (start time.Time, took, waited time.Duration) {
	var w view.Waits
	start = time.Now()
	read(&w)
	return start, time.Since(start), w.Duration()
}
