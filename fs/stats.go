package fs

import (
	"encoding/json"
	"log"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/blockfs/blockfs/view"
)

// Counters are what the FUSE layer itself knows of a mount: the bytes it served by file, its
// reads and where their time went, the daemon process, and the open files. Package mount
// composes them with the layers below (the cache, the disk cache, the object store, a
// mixture's sources) into stats.json (report.Stats, through Options.Stats); the JSON keys are
// stats.json's.
type Counters struct {
	DataServed    uint64 `json:"bytes_served"`         // epoch and shard data bytes returned
	IDsServed     uint64 `json:"ids_bytes_served"`     // .ids bytes returned
	OffsetsServed uint64 `json:"offsets_bytes_served"` // .offsets bytes returned
	Reads         uint64 `json:"read_requests"`        // FUSE reads answered
	ReadErrors    uint64 `json:"read_errors"`          // FUSE reads answered with an error
	// ErrorsByKind counts ReadErrors by kind (every one of ErrorKinds); LastErrors are the
	// last distinct failures, the most recent last, each with its reason.
	ErrorsByKind map[string]uint64 `json:"read_errors_by_kind"`
	LastErrors   []ErrorStats      `json:"last_errors"`
	ReadsWaited  uint64            `json:"reads_waited"`      // FUSE reads that waited for a load
	WaitSeconds  float64           `json:"read_wait_seconds"` // time reads waited for loads: the data stall
	ReadSeconds  float64           `json:"read_seconds"`      // time reads took in the daemon
	// ReaderSeconds is the readers' time from their first read on (to now, or to their
	// close), summed: Stall is WaitSeconds over it (at most 1; 0 before any read).
	ReaderSeconds float64       `json:"reader_seconds"`
	Stall         float64       `json:"stall"`
	Uptime        float64       `json:"uptime_seconds"`   // since the mount was made
	PID           int           `json:"daemon_pid"`       // the daemon's process
	RSS           int64         `json:"daemon_rss_bytes"` // its resident memory; -1 if unknown
	Goroutines    int           `json:"goroutines"`       // the daemon's goroutines now
	OpenFDs       int           `json:"open_fds"`         // the daemon's open file descriptors now; -1 if unknown
	Readers       []ReaderStats `json:"readers"`          // the open files, oldest first
	// SourceServed counts a mixture's .source bytes returned (omitted while 0: other
	// datasets have no .source files).
	SourceServed uint64 `json:"source_bytes_served,omitempty"`
	// The shared-memory path (docs/SHM.md): its reads (counted in read_requests too), the
	// clients connected now, and the bytes of their buffers mapped into the daemon now (their
	// memory, not the daemon's: daemon_rss_bytes leaves them out).
	ShmReads   uint64 `json:"shm_read_requests"`
	ShmClients int64  `json:"shm_clients"`
	ShmMapped  int64  `json:"shm_mapped_bytes"`
	// Drop-behind (fs/drop.go): ranges of epoch files that readers had passed, dropped from
	// the kernel's page cache; the time the kernel took for it, on the daemon's workers (not
	// in read_seconds); and ranges left in the page cache because the workers were behind.
	PageCacheDrops        uint64  `json:"page_cache_drops"`
	PageCacheDropSeconds  float64 `json:"page_cache_drop_seconds"`
	PageCacheDropsSkipped uint64  `json:"page_cache_drops_skipped"`
}

// Counters returns the FUSE layer's counters now.
func (s *Server) Counters() Counters { return s.m.counters() }

// Places returns where the open readers of epochs' records (through the files or the
// shared-memory path) that read in the last within are: their positions, by file.
func (s *Server) Places(within time.Duration) map[string][]int64 { return s.m.times.places(within) }

func (m *mount) counters() Counters {
	now, readers, closedNS := m.times.snapshot()
	c := Counters{
		DataServed: m.served[view.Data].Load(), IDsServed: m.served[view.IDs].Load(),
		OffsetsServed: m.served[view.Offsets].Load(), SourceServed: m.served[view.Sources].Load(),
		Reads:       m.reads.Load(),
		ReadsWaited: m.times.waited.Load(), WaitSeconds: seconds(m.times.waitNS.Load()),
		ReadSeconds: seconds(m.times.readNS.Load()), Uptime: now.Sub(m.start).Seconds(),
		Goroutines: runtime.NumGoroutine(), OpenFDs: openFDs(), PID: os.Getpid(), RSS: residentBytes(),
		Readers: readers, PageCacheDrops: m.inval.dropped.Load(),
		PageCacheDropSeconds: seconds(m.inval.ns.Load()), PageCacheDropsSkipped: m.inval.skipped.Load(),
	}
	c.ErrorsByKind, c.LastErrors = m.failed.snapshot()
	for _, n := range c.ErrorsByKind { // from the same snapshot: the two always agree
		c.ReadErrors += n
	}
	if sh := m.shm.Load(); sh != nil {
		c.ShmReads, c.ShmClients, c.ShmMapped = sh.reads.Load(), sh.clients.Load(), sh.mapped.Load()
		if c.RSS >= 0 {
			c.RSS = max(0, c.RSS-c.ShmMapped)
		}
	}
	c.ReaderSeconds = seconds(closedNS)
	for _, r := range c.Readers {
		c.ReaderSeconds += r.Active
	}
	if c.ReaderSeconds > 0 {
		c.Stall = min(1, c.WaitSeconds/c.ReaderSeconds)
	}
	return c
}

// statsJSON returns stats.json's bytes now: Options.Stats of the counters, or (without it, or
// should it fail) the counters alone.
func (m *mount) statsJSON() []byte {
	c := m.counters()
	if m.opt.Stats != nil {
		b, err := m.opt.Stats(c)
		if err == nil {
			return b
		}
		log.Printf("blockfs: %s/%s: %v; serving the FUSE layer's counters alone", view.MetaDir, view.StatsName, err)
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	return append(b, '\n')
}

// residentBytes returns the process's resident memory (/proc/self/statm), -1 if unknown.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}

// openFDs counts the process's open file descriptors (-1 if /proc is not there).
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents) - 1 // the directory being read
}
