// Package fs serves a view.Set as a read-only FUSE filesystem: epoch files, their sidecars,
// shard directories and the .blockfs directory. It is the only package that imports go-fuse;
// everything it serves comes from package view.
package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/blockfs/blockfs/view"
)

// Options configure a mount. Zero fields take the stated defaults.
type Options struct {
	Epochs     uint64         // epoch files listed in directories; default 100 (any resolves)
	Readahead  int64          // bytes of epoch order prefetched ahead of each reader; 0 disables
	AllowOther bool           // let other users read (needs user_allow_other for non-root)
	Debug      bool           // log every FUSE request
	Info       map[string]any // extra facts for .blockfs/info.json
	// Sources, when set, returns what stats.json says of each source of a mixture (under
	// "sources").
	Sources func() any
	// DiskCache, when set, returns the disk cache's counters for .blockfs/stats.json (under
	// "disk_cache"); called on every read of stats.json.
	DiskCache func() any
	// Store, when set, returns the object store's counters (under "store").
	Store func() any
	// OnRead, when set, is told of every read: how long it took in the daemon and how long
	// of that it waited for loads (the metrics' histograms).
	OnRead func(took, waited time.Duration)
}

// Type is the mount's subtype: mountinfo lists it as "fuse.blockfs".
const Type = "blockfs"

// DefaultEpochs is how many epochs a directory lists.
const DefaultEpochs = 100

// MaxEpochs is the most epochs a directory may list. ls looks up every entry it lists, and the
// kernel keeps an inode for each (in the daemon too), so a listing must stay small whatever
// the training length: any epoch can be opened by name beyond it.
const MaxEpochs = 10000

// Server is a mounted blockfs.
type Server struct {
	*fuse.Server
	Mountpoint string
	m          *mount
}

// mount is the state shared by all nodes of one mount. Immutable after Mount except counters.
type mount struct {
	set   view.Served
	opt   Options
	uid   uint32
	gid   uint32
	mtime time.Time
	info  []byte

	inval *invalidator // drops what readers have passed from the kernel's page cache

	served [view.NumKinds]atomic.Uint64 // bytes returned to readers, by view.Kind
	reads  atomic.Uint64                // FUSE read requests answered
	errs   atomic.Uint64                // FUSE read requests answered with an error
	times  readTimes                    // where reads' time went, and the open readers
	start  time.Time                    // when the mount was made
}

// Mount mounts set at mountpoint and returns once the kernel has the mount ready. A mountpoint
// /dev/fd/N (FuseFD) is a connection a privileged parent has mounted already: Mount serves it.
func Mount(mountpoint string, set view.Served, opt Options) (*Server, error) {
	mnt, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	m, err := newMount(set, opt)
	if err != nil {
		return nil, err
	}
	fopt := MountOptions(set.Dir(), m.uid, m.gid, opt.AllowOther, opt.Debug)
	fd := FuseFD(mnt)
	if fd >= 0 {
		// The parent mounted the connection with its own options. go-fuse's direct mount (as
		// root) would open a new /dev/fuse and mount it over where /dev/fd/N leads: the
		// device node.
		fopt.DirectMount = false
	}
	srv, err := gofs.Mount(mnt, m.root(), fopt)
	if err != nil {
		if fd >= 0 {
			return nil, fmt.Errorf("cannot serve the FUSE connection on %s: %w", mnt, err)
		}
		if why := whyNoMount(opt.AllowOther, err); why != "" {
			return nil, fmt.Errorf("cannot mount at %s: %s", mnt, why)
		}
		if os.Geteuid() != 0 {
			return nil, fmt.Errorf("cannot mount at %s: %v (without root, FUSE needs fusermount3 from the fuse3 package and read-write access to /dev/fuse)", mnt, err)
		}
		return nil, fmt.Errorf("cannot mount at %s: %w", mnt, err)
	}
	if fd < 0 {
		// The bdi of a mount on /dev/fd/N is the parent's to raise: stat here would name
		// /dev/fuse's device, not the mount's.
		RaiseReadahead(mnt)
	}
	return &Server{Server: srv, Mountpoint: mnt, m: m}, nil
}

// newMount builds the state of a mount of set, and its info.json.
func newMount(set view.Served, opt Options) (*mount, error) {
	if opt.Epochs == 0 {
		opt.Epochs = DefaultEpochs
	}
	m := &mount{set: set, opt: opt, uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), mtime: time.Now(),
		inval: newInvalidator(), start: time.Now()}
	if st, err := os.Stat(set.Stamp()); err == nil {
		m.mtime = st.ModTime()
	}
	// Not HTML-escaped: a dtype reads "<f4", not "\u003cf4".
	var info bytes.Buffer
	enc := json.NewEncoder(&info)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m.infoFacts()); err != nil {
		return nil, err
	}
	m.info = info.Bytes()
	return m, nil
}

// root returns the root directory node of the mount.
func (m *mount) root() gofs.InodeEmbedder { return &dirNode{m: m, root: true} }

// MountOptions are the go-fuse options of every blockfs mount, for a file system named fsName
// served as uid and gid. The benchmark's loopback baseline (bench/loopback) mounts with them
// too, so that it measures the same thing.
func MountOptions(fsName string, uid, gid uint32, allowOther, debug bool) *gofs.Options {
	timeout := time.Minute
	negative := time.Second
	return &gofs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &negative,
		UID:             uid,
		GID:             gid,
		MountOptions: fuse.MountOptions{
			FsName:     fsName,
			Name:       Type,
			Options:    []string{"ro", "default_permissions"},
			AllowOther: allowOther,
			MaxWrite:   1 << 20,
			// Each request in flight holds a 1 MiB reply buffer on the heap: 16 keeps them
			// within the daemon's constant (64 took four readers' peak RSS past it) and
			// serves as fast (docs/PERFORMANCE.md).
			MaxBackground: 16,
			// Replies are in-memory buffers; splicing them only adds a pipe (and go-fuse logs
			// every 1 MiB reply that does not fit one).
			DisableSplice: true,
			Debug:         debug,
			DirectMount:   os.Geteuid() == 0,
		},
	}
}

// RaiseReadahead lets the kernel read ahead up to 4 MiB on the mount at mnt; go-fuse can only
// lower the default of 128 KiB. Best effort: without it the mount still works, with smaller
// reads. Mount calls it; so does the loopback baseline.
func RaiseReadahead(mnt string) {
	var st syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		return
	}
	major, minor := (st.Dev>>8)&0xfff, (st.Dev&0xff)|((st.Dev>>12)&0xfff00)
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", major, minor)
	if err := os.WriteFile(p, []byte("4096"), 0); err != nil && os.Geteuid() == 0 {
		log.Printf("blockfs: cannot raise kernel readahead (%v); reads stay at 128 KiB", err)
	}
}

// infoFacts returns what .blockfs/info.json says: the set's facts (view.Set.Facts), how many
// epochs a directory lists, and Options.Info.
func (m *mount) infoFacts() map[string]any {
	f := m.set.Facts()
	f["epochs"] = m.opt.Epochs
	for k, v := range m.opt.Info {
		f[k] = v
	}
	return f
}

// Stats is what .blockfs/stats.json says.
type Stats struct {
	DataServed    uint64  `json:"bytes_served"`         // epoch and shard data bytes returned
	IDsServed     uint64  `json:"ids_bytes_served"`     // .ids bytes returned
	OffsetsServed uint64  `json:"offsets_bytes_served"` // .offsets bytes returned
	Reads         uint64  `json:"read_requests"`        // FUSE reads answered
	ReadErrors    uint64  `json:"read_errors"`          // FUSE reads answered with an error
	ReadsWaited   uint64  `json:"reads_waited"`         // FUSE reads that waited for a load
	WaitSeconds   float64 `json:"read_wait_seconds"`    // time reads waited for loads: the data stall
	ReadSeconds   float64 `json:"read_seconds"`         // time reads took in the daemon
	// ReaderSeconds is the readers' time from their first read on (to now, or to their
	// close), summed: Stall is WaitSeconds over it.
	ReaderSeconds float64       `json:"reader_seconds"`
	Stall         float64       `json:"stall"`
	Uptime        float64       `json:"uptime_seconds"` // since the mount was made
	PID           int           `json:"daemon_pid"`     // the daemon's process
	RSS           int64         `json:"daemon_rss_bytes"`
	Goroutines    int           `json:"goroutines"` // the daemon's goroutines now
	OpenFDs       int           `json:"open_fds"`   // the daemon's open file descriptors now
	Readers       []ReaderStats `json:"readers"`    // the open files, oldest first
	view.CacheStats
	DiskCache    any    `json:"disk_cache,omitempty"`          // the --disk-cache's counters (Options.DiskCache)
	Store        any    `json:"store,omitempty"`               // the object store's counters (Options.Store)
	Sources      any    `json:"sources,omitempty"`             // a mixture's sources' counters (Options.Sources)
	SourceServed uint64 `json:"source_bytes_served,omitempty"` // a mixture's .source bytes returned
}

// Stats returns the mount's stats.json now.
func (s *Server) Stats() Stats { return s.m.stats() }

func (m *mount) stats() Stats {
	now, readers, closedNS := m.times.snapshot()
	d := Stats{
		DataServed: m.served[view.Data].Load(), IDsServed: m.served[view.IDs].Load(),
		OffsetsServed: m.served[view.Offsets].Load(), Reads: m.reads.Load(), ReadErrors: m.errs.Load(),
		ReadsWaited: m.times.waited.Load(), WaitSeconds: seconds(m.times.waitNS.Load()),
		ReadSeconds: seconds(m.times.readNS.Load()), Uptime: now.Sub(m.start).Seconds(),
		Goroutines: runtime.NumGoroutine(), OpenFDs: openFDs(), PID: os.Getpid(), RSS: residentBytes(),
		Readers:    readers,
		CacheStats: m.set.Stats(),
	}
	d.ReaderSeconds = seconds(closedNS)
	for _, r := range d.Readers {
		d.ReaderSeconds += r.Active
	}
	if d.ReaderSeconds > 0 {
		d.Stall = min(1, d.WaitSeconds/d.ReaderSeconds)
	}
	if m.opt.DiskCache != nil {
		d.DiskCache = m.opt.DiskCache()
	}
	if m.opt.Store != nil {
		d.Store = m.opt.Store()
	}
	if m.opt.Sources != nil {
		d.Sources = m.opt.Sources()
		d.SourceServed = m.served[view.Sources].Load()
	}
	return d
}

// statsJSON returns stats.json's bytes now.
func (m *mount) statsJSON() []byte {
	b, _ := json.MarshalIndent(m.stats(), "", "  ")
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
