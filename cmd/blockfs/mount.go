package main

import (
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/cache"
	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/internal/mountinfo"
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/diskcache"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/source/s3"
	"github.com/blockfs/blockfs/view"
)

type mountFlags struct {
	seed       uint64
	shuffle    string
	mix        int
	epochs     uint64
	cacheSize  string
	readahead  string
	daemon     bool
	allowOther bool
	debug      bool
	logFile    string
	verify     bool
	inPlace    inPlaceFlags
	cpuProfile string
	direct     string
	s3         s3Flags
	disk       diskCacheFlags
}

// daemonHeapLimit is the soft limit on the daemon's Go heap (the page cache is not in it).
const daemonHeapLimit = 40 << 20

// defaultReadahead is blockfs mount's --readahead.
const defaultReadahead = 64 << 20

func newMount() *cobra.Command {
	var f mountFlags
	c := &cobra.Command{
		Use:   "mount [flags] DATA MOUNTPOINT",
		Short: "Mount a dataset as block-shuffled epoch files",
		Long: `mount serves DATA read-only at MOUNTPOINT. DATA is a dataset made by blockfs pack, or an
existing file served in place with no copy: a .npy file, or a flat file of fixed-size records
with --record-size; its blocks are then consecutive ranges of --block-size of the file.
The tree:

  epoch-NNNN            every record once, in epoch NNNN's block-shuffled order
  epoch-NNNN.ids        uint64 little-endian source index of each record of epoch-NNNN
  epoch-NNNN.offsets    uint64 little-endian byte offsets, records+1 (variable-length only)
  shard-R-of-W/...      the same files for slice R of W of each epoch (DDP ranks x workers)
  .blockfs/info.json    dataset and mount facts; .blockfs/stats.json live counters

The order is a pure function of the data, --seed, the epoch, --shuffle and --mix.

Choosing --mix: on data that pack pre-shuffled (the default), --mix 1 trains within 0.2
points of a uniform shuffle (docs/SHUFFLE.md); on data stored in order (a file served in place,
or pack --no-shuffle) raise --mix so that batches draw from more blocks (16 recovered about
half of the loss on class-sorted data). The cost is memory: the page cache needs about
--mix x block size for the window being read, plus --readahead, per reader at a different
place; --cache-size bounds it (the daemon's RSS stays within --cache-size plus a small
constant).

Runs in the foreground until SIGINT/SIGTERM or 'blockfs unmount'; --daemon returns once the
mount is ready.`,
		Args: exactArgs("DATA", "MOUNTPOINT"),
		RunE: func(c *cobra.Command, args []string) error { return runMount(f, args[0], args[1]) },
	}
	fl := c.Flags()
	fl.Uint64Var(&f.seed, "seed", 0, "shuffle seed")
	fl.StringVar(&f.shuffle, "shuffle", "full", "order: full (blocks and records shuffled), blocks (blocks shuffled, records in stored order), none")
	fl.IntVar(&f.mix, "mix", 1, "shuffle records across windows of K consecutive blocks (full only); needs K x block size of cache")
	fl.Uint64Var(&f.epochs, "epochs", bfs.DefaultEpochs, "epoch files listed by ls (any epoch number can be opened)")
	fl.StringVar(&f.cacheSize, "cache-size", "auto", "memory budget for data: the daemon's cache plus the blocks kept resident in the kernel's page cache; auto: the memory (RAM or the cgroup's limit) less a quarter for the trainer and what other mounts took")
	fl.StringVar(&f.direct, "direct", "auto", "read blocks with O_DIRECT: on (all, into the cache), off (none), or auto (the blocks outside the resident set)")
	fl.StringVar(&f.readahead, "readahead", ibytes(defaultReadahead), "bytes of the epoch order prefetched ahead of each reader (0 disables)")
	fl.BoolVar(&f.daemon, "daemon", false, "run in the background; return once the mount is ready")
	fl.BoolVar(&f.allowOther, "allow-other", false, "let other users read the mount (non-root needs user_allow_other in /etc/fuse.conf)")
	fl.BoolVar(&f.debug, "debug", false, "log every FUSE request")
	fl.StringVar(&f.logFile, "log", "", "append log lines to this file (default: stderr; discarded with --daemon)")
	fl.BoolVar(&f.verify, "verify", false, "check each block file's CRC32C the first time it is read; a block that fails reads as EIO")
	f.inPlace.register(fl)
	f.s3.register(fl)
	f.disk.register(fl)
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the daemon (pprof format) to this file at unmount")
	_ = fl.MarkHidden("cpuprofile")
	return c
}

// mountPlan is everything checked before mounting.
type mountPlan struct {
	ds        *layout.Dataset
	src       source.Blocks // the dataset's files: local, checksums checked with --verify
	order     shuffle.Options
	cacheOpt  cache.Options
	mem       view.MemoryPlan
	readahead int64
	mnt       string
	disk      *diskcache.Options // --disk-cache, opened by the daemon (it takes a lock); nil without
}

func planMount(f mountFlags, data, mnt string) (*mountPlan, error) {
	order, err := orderOptions(f.seed, 0, f.shuffle, f.mix)
	if err != nil {
		return nil, err
	}
	if f.epochs == 0 || f.epochs > bfs.MaxEpochs {
		return nil, usagef("--epochs %d is out of range (1 to %d; it is how many epochs ls lists, and any epoch can be opened by name)", f.epochs, bfs.MaxEpochs)
	}
	var cs int64 // 0: auto
	if f.cacheSize != "auto" {
		if cs, err = parseSize("cache-size", f.cacheSize); err != nil {
			return nil, err
		}
	}
	direct, err := view.ParseDirect(f.direct)
	if err != nil {
		return nil, usagef("--direct: %v", err)
	}
	ra, err := parseSize("readahead", f.readahead)
	if err != nil {
		return nil, err
	}
	remote := s3.IsURL(data)
	var part int64 // the s3 part size when ra was derived from the s3 flags, not given
	if remote && f.readahead == ibytes(defaultReadahead) {
		// From an object store the readahead is what keeps --s3-concurrency GETs in flight:
		// by default twice that many parts ahead (128 MiB with the defaults).
		if ps, err := parseSize("s3-part-size", f.s3.partSize); err == nil && 2*int64(f.s3.concurrency)*ps > ra {
			ra, part = 2*int64(f.s3.concurrency)*ps, ps
		}
	}
	var ds *layout.Dataset
	if remote {
		ds, err = openRemote(f.inPlace, &f.s3, data)
	} else {
		ds, err = openData(f.inPlace, data)
	}
	if err != nil {
		return nil, err
	}
	where := ds.Dir // the data the mount point must not be inside: the dataset, or the file served
	if ds.Flat() {
		where = ds.Manifest.Source
	}
	absMnt, err := checkMountpoint(mnt, where)
	if err != nil {
		return nil, err
	}
	need := view.NeedCache(ds, f.mix, ra, cache.DefaultPageSize)
	if win := need.MaxBlock * int64(need.Mix); part > 0 && cs > 0 && ra > (cs-win)/2 {
		// A readahead the user did not ask for leaves at least half of the --cache-size they
		// gave, beside the window being read, to blocks already fetched: a block evicted
		// before its reader comes is fetched twice (16 MiB parts, 256 MiB readahead and a
		// 256 MiB cache read at half the rate). At least one part.
		ra = max(part, (cs-win)/2)
		need = view.NeedCache(ds, f.mix, ra, cache.DefaultPageSize)
	}
	if cs > 0 && cs < need.Need {
		// Whole pages: a need just over a size must not print as that size.
		upTo := (need.Need + cache.DefaultPageSize - 1) / cache.DefaultPageSize * cache.DefaultPageSize
		return nil, usagef("--cache-size %s is too small: it needs %s, the larger of a window of --mix %d blocks of up to %s plus --readahead %s (%s) and %d pages of %s (a read holds its pages while the reply is written, and readahead needs room beside it); raise --cache-size or lower --mix or --readahead",
			ibytes(uint64(cs)), ibytes(uint64(upTo)), need.Mix, ibytes(uint64(need.MaxBlock)), ibytes(uint64(ra)), ibytes(uint64(need.Window)), cache.MinPages, ibytes(cache.DefaultPageSize))
	}
	mem0 := sysmem.Read()
	mem := view.PlanMemory(ds, cache.DefaultPageSize, cs, need.Window, direct, mem0, bfs.Claimed(mem0, absData(data), ds.Manifest.Fingerprint(), time.Second))
	// The order state's share of the budget (view.NewSet reserves it) never leaves the pages
	// less than the windows and readahead need.
	copt := cache.Options{Size: mem.CacheSize, Keep: need.Need}
	if remote {
		// Readahead loads a block file in one run, so the object is fetched whole (in ranged
		// GETs of --s3-part-size) and its CRC32C checked on the way into the cache; one worker
		// per request in flight keeps --s3-concurrency GETs busy.
		if f.disk.dir == "" {
			// No local files for the kernel to keep: the cache is all the memory there is.
			mem.Direct, mem.Reason = false, "an object store"
			mem.Resident, mem.ResidentBlocks = 0, 0
		} else {
			mem.Reason = "the disk cache's reads: " + mem.Reason
		}
		copt.MaxRead = int(min(max(need.MaxBlock, cache.DefaultMaxRead)+cache.DefaultPageSize-1, maxRemoteRead) / cache.DefaultPageSize * cache.DefaultPageSize)
		copt.Workers = f.s3.concurrency
	}
	if err := copt.Validate(); err != nil {
		return nil, usagef("--cache-size: %v", err)
	}
	plan := &mountPlan{ds: ds, order: order, cacheOpt: copt, mem: mem, readahead: ra, mnt: absMnt}
	if plan.disk, err = f.disk.options(ds, remote, absMnt); err != nil {
		return nil, err
	}
	if plan.disk != nil {
		plan.disk.Direct, plan.disk.Streams = mem.Direct, mem.Streams
	}
	// Direct I/O: block data goes from the disk straight into the page-aligned cache, cached
	// once; buffered: the kernel keeps the block files too. With a resident set, its blocks
	// are read buffered and stay in the kernel's page cache, the others stream with O_DIRECT
	// (view.PlanMemory says when).
	plan.src = local.New(ds, mem.Direct)
	if mem.Direct && mem.ResidentBlocks > 0 {
		plan.src = local.NewStreaming(ds, mem.Streams)
	}
	if remote {
		plan.src = ds.Source() // the object store, checked by ETag and CRC32C
	}
	if f.verify && plan.disk == nil { // with a disk cache, openDiskCache puts the check above it
		if plan.src, err = layout.NewVerified(ds, plan.src); err != nil {
			return nil, usagef("--verify: %v", err)
		}
	}
	return plan, nil
}

// inPlaceFlags describe a file served in place (mount and order take them).
type inPlaceFlags struct {
	recordSize string
	blockSize  string
	offset     string
	records    uint64
	window     string // rows per window; "" for none
	stride     uint64
	segments   string
}

func (f *inPlaceFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.recordSize, "record-size", "", "record size, to serve a flat file of fixed-size records in place")
	fl.StringVar(&f.blockSize, "block-size", ibytes(layout.DefaultBlockSize), "logical block size for a file served in place")
	fl.StringVar(&f.offset, "offset", "0", "where the records start in a raw file served in place (after a header)")
	fl.Uint64Var(&f.records, "records", 0, "how many records a raw file served in place holds from --offset (a trailer may follow); 0: the rest of the file")
	fl.StringVar(&f.window, "window", "", "serve windows of this many consecutive rows of a file in place as records (time series)")
	fl.Uint64Var(&f.stride, "stride", 1, "with --window: rows between window starts")
	fl.StringVar(&f.segments, "segments", "", "with --window: a JSON file with an index_map of {start_row, end_row} (inclusive), or a .npy of int64 segment start rows; windows never cross a segment")
}

// openData opens a packed dataset directory, or a file to serve in place.
func openData(f inPlaceFlags, data string) (*layout.Dataset, error) {
	bs, err := parseSize("block-size", f.blockSize)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(data)
	if err != nil || st.IsDir() {
		for _, fl := range []struct {
			name string
			set  bool
		}{{"--record-size", f.recordSize != ""}, {"--offset", f.offset != "0"}, {"--records", f.records != 0}} {
			if fl.set {
				return nil, usagef("%s is for a file served in place; %s is a dataset directory", fl.name, data)
			}
		}
		ds, err := local.Open(data)
		if err != nil {
			return nil, err
		}
		return f.windowed(ds, bs)
	}
	var rs int64
	if f.recordSize != "" {
		if rs, err = parseSize("record-size", f.recordSize); err != nil {
			return nil, err
		}
		if rs == 0 {
			return nil, usagef("--record-size must be at least 1 byte")
		}
	}
	if bs == 0 {
		return nil, usagef("--block-size must be at least 1 byte")
	}
	off, err := parseSize("offset", f.offset)
	if err != nil {
		return nil, err
	}
	if f.records > math.MaxInt64 {
		return nil, usagef("--records %d is too large", f.records)
	}
	ds, err := layout.OpenFlat(data, layout.FlatOptions{RecordSize: rs, BlockSize: bs, Offset: off, Records: int64(f.records)})
	if err != nil {
		return nil, err
	}
	return f.windowed(ds, bs)
}

// windowed applies --window, --stride and --segments to ds (rows), or returns it as it is.
func (f inPlaceFlags) windowed(ds *layout.Dataset, blockSize int64) (*layout.Dataset, error) {
	if f.window == "" && (f.stride != 1 || f.segments != "") {
		return nil, usagef("--stride and --segments go with --window")
	}
	if f.window == "" {
		return ds, nil
	}
	window, err := strconv.ParseUint(f.window, 10, 31)
	if err != nil || window == 0 {
		return nil, usagef("--window %s: give the rows per window, from 1 to %d", f.window, math.MaxInt32)
	}
	if f.stride == 0 || f.stride > math.MaxInt32 {
		return nil, usagef("--stride %d: give the rows between window starts, from 1 to %d", f.stride, math.MaxInt32)
	}
	opt := layout.WindowOptions{Length: int64(window), Stride: int64(f.stride)}
	if f.segments != "" {
		if opt.Segments, err = layout.ReadSegments(f.segments, int64(ds.Records())); err != nil {
			return nil, err
		}
	}
	return layout.Windows(ds, opt, blockSize)
}

func runMount(f mountFlags, data, mnt string) error {
	plan, err := planMount(f, data, mnt)
	if err != nil {
		return err
	}
	if f.daemon && os.Getenv(readyFDEnv) == "" {
		return startDaemon(f.logFile)
	}
	if err := setupLog(f.logFile); err != nil {
		return err
	}
	// The cache lives outside the Go heap; keep the heap itself (O(blocks) epoch tables, FUSE
	// buffers) tight so RSS stays within the cache budget plus a small constant.
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(daemonHeapLimit)
	info := map[string]any{}
	var diskStats func() any
	if plan.disk != nil {
		closeDisk, st, err := openDiskCache(plan, f.verify)
		if err != nil {
			return err
		}
		defer closeDisk()
		diskStats = st
		info["disk_cache"], info["disk_cache_size"] = plan.disk.Dir, plan.disk.Size
	}
	c, err := cache.New(plan.src, plan.cacheOpt)
	if err != nil {
		return err
	}
	set, err := view.NewSet(plan.ds, c, plan.order)
	if err != nil {
		c.Close()
		return err
	}
	// The order state lives on the heap, in bytes the Set took out of the cache's budget.
	debug.SetMemoryLimit(daemonHeapLimit + set.OrderBytes())
	// Signals are caught from before the mount appears: one that arrives while go-fuse is still
	// mounting is served (unmount, exit 0) once the mount is up, instead of killing the
	// daemon and leaving a dead mount behind.
	// Every signal whose default would kill the daemon is caught, so none leaves a dead mount
	// behind: SIGINT, SIGTERM and SIGQUIT unmount; SIGHUP, SIGUSR1 and SIGUSR2 are logged and
	// ignored; SIGPIPE (a closed log pipe) is ignored, so a log write fails instead.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	signal.Ignore(syscall.SIGPIPE)
	defer signal.Stop(sigs)
	srv, err := bfs.Mount(plan.mnt, set, bfs.Options{
		Epochs: f.epochs, Readahead: plan.readahead, AllowOther: f.allowOther, Debug: f.debug, DiskCache: diskStats,
		Info: withInfo(info, map[string]any{"cache_size": c.Capacity() + set.OrderBytes(), "order_state_budget": set.OrderBytes(), "cache_size_reason": plan.mem.CacheReason,
			"direct_io": plan.mem.Direct, "direct_io_reason": plan.mem.Reason, "memory": plan.mem.Facts(),
			"readahead": plan.readahead, "verify": f.verify,
			"open_data": absData(data), "open_flags": f.inPlace.args()}),
	})
	if err != nil {
		c.Close()
		return err
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			srv.Unmount()
			c.Close()
			return err
		}
		defer stop()
	}
	log.Printf("blockfs: serving %s (%d records, %s, %d blocks) at %s; shuffle %s, mix %d, seed %d",
		plan.ds.Dir, plan.ds.Records(), ibytes(plan.ds.Bytes()), plan.ds.Blocks(), plan.mnt, f.shuffle, f.mix, f.seed)
	log.Printf("blockfs: memory budget %s (%s); cache %s (%s); direct I/O %v (%s)", ibytes(uint64(plan.mem.Budget)), plan.mem.BudgetReason,
		ibytes(uint64(c.Capacity())), plan.mem.CacheReason, plan.mem.Direct, plan.mem.Reason)
	signalReady()
	if serve(srv, plan.mnt, sigs) {
		// Only once the server has stopped may the cache's memory go.
		c.Close()
	}
	log.Printf("blockfs: %s unmounted", plan.mnt)
	return nil
}

// drainTime is how long a signalled mount waits for readers that still hold files open
// before it exits anyway; the kernel then fails their reads (ENOTCONN) instead of hanging.
const drainTime = 5 * time.Second

// serve waits until the mount goes away (blockfs unmount, fusermount -u) or a signal asks for
// it. SIGHUP, SIGUSR1 and SIGUSR2 are logged and ignored. On SIGINT/SIGTERM/SIGQUIT it unmounts; if readers keep files open it detaches lazily and waits
// at most drainTime. It reports whether the server stopped (false: exiting with it running).
func serve(srv *bfs.Server, mnt string, sigs <-chan os.Signal) bool {
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	for waiting := true; waiting; {
		select {
		case <-done:
			return true
		case sig := <-sigs:
			if ignored(sig) {
				// A closed terminal, a log rotation, a stray signal: the mount stays.
				log.Printf("blockfs: %v: ignored; %s stays mounted (stop it with blockfs unmount %s)", sig, mnt, mnt)
				continue
			}
			log.Printf("blockfs: %v: unmounting %s", sig, mnt)
			waiting = false
		}
	}
	if err := srv.Unmount(); err != nil {
		log.Printf("blockfs: unmount: %s; detaching lazily", strings.Join(strings.Fields(err.Error()), " "))
		if err := detach(mnt); err != nil {
			log.Printf("blockfs: %v", err)
		}
	}
	deadline := time.After(drainTime)
	for {
		select {
		case <-done:
			return true
		case <-deadline:
			log.Printf("blockfs: readers still hold files open after %v; exiting (their reads now fail)", drainTime)
			return false
		case sig := <-sigs:
			if ignored(sig) {
				log.Printf("blockfs: %v during unmount: ignored", sig)
				continue
			}
			log.Printf("blockfs: %v during unmount: exiting now", sig)
			return false
		}
	}
}

// ignored reports whether a signal is logged and ignored rather than a reason to stop: a
// closed terminal, a log rotation, a stray user signal.
func ignored(sig os.Signal) bool {
	return sig == syscall.SIGHUP || sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2
}

// setupLog sends log lines to path (appending), or leaves them on stderr.
func setupLog(path string) error {
	log.SetFlags(log.LstdFlags)
	if path == "" {
		if os.Getenv(readyFDEnv) != "" {
			log.SetOutput(io.Discard)
		}
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("--log: %w", err)
	}
	log.SetOutput(f)
	return nil
}

// checkMountpoint requires an existing, empty directory that is not already a mount point and
// is not inside the dataset. It returns its absolute path.
func checkMountpoint(mnt, dataDir string) (string, error) {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		if os.IsNotExist(err) {
			return "", fmt.Errorf("mount point %s does not exist (create it with mkdir)", mnt)
		}
		if pe, ok := err.(*os.PathError); ok && pe.Err == syscall.ENOTCONN {
			return "", fmt.Errorf("mount point %s is a stale mount (clear it with 'blockfs unmount %s')", mnt, mnt)
		}
		return "", fmt.Errorf("mount point %s: %w", mnt, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("mount point %s is not a directory", mnt)
	}
	realMnt, err1 := filepath.EvalSymlinks(abs)
	realData, err2 := filepath.EvalSymlinks(dataDir)
	if err1 == nil && err2 == nil && (realMnt == realData || strings.HasPrefix(realMnt, realData+string(filepath.Separator))) {
		return "", fmt.Errorf("mount point %s is inside the dataset %s; use a directory outside it", mnt, dataDir)
	}
	if isMountpoint(abs) {
		return "", fmt.Errorf("%s is already a mount point (unmount it first: blockfs unmount %s)", mnt, mnt)
	}
	ents, err := os.ReadDir(abs)
	if err != nil {
		return "", fmt.Errorf("mount point %s: %w", mnt, err)
	}
	if len(ents) > 0 {
		return "", fmt.Errorf("mount point %s is not empty (mounting would hide its %d entries; use an empty directory)", mnt, len(ents))
	}
	return abs, nil
}

// isMountpoint reports whether dir is listed as a mount point in /proc/self/mountinfo.
func isMountpoint(dir string) bool {
	mounts, _ := mountinfo.Read("/proc/self/mountinfo")
	for _, m := range mounts {
		if m.Mountpoint == dir {
			return true
		}
	}
	return false
}

// waitReady is how long --daemon waits for the child to report.
const waitReady = 60 * time.Second

// startCPUProfile profiles the daemon into path until the returned function is called (the
// --cpuprofile flag, for docs/PERFORMANCE.md's profiles).
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// orderOptions checks the order flags of mount and order and returns them as shuffle options
// (shuffle.Options.Validate has the rules; 0 means the default to the library, so --mix 0 is
// refused here).
func orderOptions(seed, epoch uint64, mode string, mix int) (shuffle.Options, error) {
	m, err := shuffle.ParseMode(mode)
	if err != nil {
		return shuffle.Options{}, usagef("--shuffle: %v", err)
	}
	opt := shuffle.Options{Seed: seed, Epoch: epoch, Mode: m, Mix: mix}
	if mix < 1 {
		return opt, usagef("--mix %d is out of range (1 to %d)", mix, shuffle.MaxMix)
	}
	if err := opt.Validate(); err != nil {
		return opt, usagef("--mix %d: %v", mix, err)
	}
	return opt, nil
}
