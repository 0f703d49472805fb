package main

import (
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/s3"
)

type mountFlags struct {
	seed       uint64
	shuffle    string
	mix        string
	epochs     uint64
	cacheSize  string
	readahead  string
	daemon     bool
	allowOther bool
	unreadable bool
	debug      bool
	logFile    string
	verify     bool
	inPlace    inPlaceFlags
	cpuProfile string
	metrics    string
	metricsAll bool
	direct     string
	usersLock  string
	rmMnt      bool
	s3         s3Flags
	disk       diskCacheFlags
	nodes      int
	node       int
	parts      int
}

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

Choosing --mix: the default, auto, gives batches close to a uniform shuffle's whatever the
layout: --mix 1 on data that pack pre-shuffled (within 0.2 points of a uniform shuffle,
docs/SHUFFLE.md); on data stored in order (a file served in place, windows, pack
--no-shuffle) windows of 512 MiB of blocks, or the whole data when smaller, so a batch draws
from hundreds of places. info.json's "order" says the choice and why; mount warns when a
--mix or --block-size you give makes batches far from uniform. The cost is memory: the page
cache needs about --mix x block size for the window being read, plus --readahead, per reader
at a different place; --cache-size bounds it (the daemon's RSS stays within --cache-size plus
a small constant), and an automatic window that would not fit is made smaller.

Runs in the foreground until SIGINT/SIGTERM or 'blockfs unmount'; --daemon returns once the
mount is ready.

MOUNTPOINT may be /dev/fd/N: a /dev/fuse descriptor that a privileged parent opened, mounted
with mount(2) and passed down as N. blockfs then serves it without root or fusermount3, and
the parent unmounts it (docs/USAGE.md, "Without root, and in containers").`,
		Args: exactArgs("DATA", "MOUNTPOINT"),
		RunE: func(c *cobra.Command, args []string) error { return runMount(c.Flags(), f, args[0], args[1]) },
	}
	f.register(c.Flags())
	return c
}

// register registers mount's flags on fl.
func (f *mountFlags) register(fl *pflag.FlagSet) {
	fl.Uint64Var(&f.seed, "seed", 0, "shuffle seed")
	fl.StringVar(&f.shuffle, "shuffle", "full", "order: full (blocks and records shuffled), blocks (blocks shuffled, records in stored order), none")
	fl.StringVar(&f.mix, "mix", "auto", "shuffle records across windows of K consecutive blocks (full only; needs K x block size of cache); auto: 1 on data pack pre-shuffled, else windows of 512 MiB of blocks (the whole data when smaller)")
	fl.Uint64Var(&f.epochs, "epochs", bfs.DefaultEpochs, "epoch files listed by ls (any epoch number can be opened)")
	fl.StringVar(&f.cacheSize, "cache-size", "auto", "memory budget for data: the daemon's cache plus the blocks kept resident in the kernel's page cache; auto: the memory (RAM or the cgroup's limit) less a quarter for the trainer and what other mounts took")
	fl.StringVar(&f.direct, "direct", "auto", "read blocks with O_DIRECT: on (all, into the cache), off (none), or auto (the blocks outside the resident set)")
	fl.StringVar(&f.readahead, "readahead", ibytes(mount.DefaultReadahead), "bytes of the epoch order prefetched ahead of each reader (0 disables)")
	fl.BoolVar(&f.daemon, "daemon", false, "run in the background; return once the mount is ready")
	fl.BoolVar(&f.allowOther, "allow-other", false, "let other users read the mount (non-root needs user_allow_other in /etc/fuse.conf); refused when other users cannot read the dataset's files themselves")
	fl.BoolVar(&f.unreadable, "allow-other-unreadable", false, "with --allow-other: serve data whose files other users cannot read themselves (or in an object store) to every user anyway")
	fl.BoolVar(&f.debug, "debug", false, "log every FUSE request")
	fl.StringVar(&f.logFile, "log", "", "append log lines to this file (default: stderr; discarded with --daemon)")
	fl.StringVar(&f.usersLock, "users-lock", "", "unmount and exit within a second once no process holds a POSIX (fcntl) lock on this file (blockfs.Mount's users each hold one)")
	fl.BoolVar(&f.rmMnt, "remove-mountpoint", false, "with --users-lock: remove the mountpoint and the lock files when the last user is gone")
	fl.BoolVar(&f.verify, "verify", false, "check each block file's CRC32C the first time it is read; a block that fails reads as EIO")
	f.inPlace.register(fl)
	f.s3.register(fl)
	f.disk.register(fl)
	fl.IntVar(&f.nodes, "nodes", 0, "the job's node count (torchrun's --nnodes): serve only this node's canonical parts of the data, the same every epoch, so a node's disk and page caches keep what it reads (docs/SHUFFLE.md, \"Many nodes\"); 0: the whole data")
	fl.IntVar(&f.node, "node", 0, "with --nodes: this node, 0 to nodes-1 (torchrun's --node_rank, Slurm's $SLURM_NODEID)")
	fl.IntVar(&f.parts, "parts", 0, "with --nodes: the canonical parts the blocks are dealt to, a multiple of every node count the job may run at (default: 48, or fewer for data of fewer than 192 blocks: at least 4 blocks a part)")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the daemon (pprof format) to this file at unmount")
	_ = fl.MarkHidden("cpuprofile")
	fl.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (ADDR is HOST:PORT, e.g. 127.0.0.1:9560; off by default)")
	fl.BoolVar(&f.metricsAll, "metrics-allow-remote", false, "with --metrics: allow an address other than loopback (the metrics are then served to the network)")
}

// options turns the flags into the mount package's options.
func (f mountFlags) options(fl *pflag.FlagSet, data, mnt string) (mount.Options, error) {
	if f.unreadable && !f.allowOther {
		return mount.Options{}, usagef("--allow-other-unreadable goes with --allow-other")
	}
	if f.metricsAll && f.metrics == "" {
		return mount.Options{}, usagef("--metrics-allow-remote goes with --metrics ADDR")
	}
	if f.metrics != "" {
		if err := mount.CheckMetricsAddr(f.metrics, f.metricsAll); err != nil {
			return mount.Options{}, err
		}
	}
	o := mount.Options{Data: data, Mountpoint: mnt, Epochs: f.epochs, Verify: f.verify, AllowOther: f.allowOther, AllowOtherUnreadable: f.unreadable,
		Debug: f.debug, CPUProfile: f.cpuProfile, DiskCache: f.disk.dir, Readahead: mount.AutoReadahead,
		UsersLock: f.usersLock, RemoveMountpoint: f.rmMnt, Metrics: f.metrics, MetricsRemote: f.metricsAll}
	var err error
	if o.Order, err = orderOptions(f.seed, 0, f.shuffle, f.mix); err != nil {
		return o, err
	}
	if f.epochs == 0 || f.epochs > bfs.MaxEpochs {
		return o, usagef("--epochs %d is out of range (1 to %d; it is how many epochs ls lists, and any epoch can be opened by name)", f.epochs, bfs.MaxEpochs)
	}
	if f.cacheSize != "auto" {
		if o.CacheSize, err = parseSize("cache-size", f.cacheSize); err != nil {
			return o, err
		}
	}
	if o.Direct, err = mount.ParseDirect(f.direct); err != nil {
		return o, usagef("--direct: %v", err)
	}
	if fl.Changed("readahead") {
		if o.Readahead, err = parseSize("readahead", f.readahead); err != nil {
			return o, err
		}
	}
	o.Nodes = mount.Nodes{Nodes: f.nodes, Node: f.node, Parts: f.parts}
	if f.nodes < 0 || f.parts < 0 {
		return o, usagef("--nodes %d --parts %d: need positive counts", f.nodes, f.parts)
	}
	kind := mount.Locate(data).Kind
	if f.nodes > 0 && (kind == mount.MixtureFile || kind == mount.FieldsDir) {
		return o, usagef("--nodes is for one dataset; %s is a mixture or a dataset with fields, which are not node-aware yet: mount it whole on each node", data)
	}
	if kind == mount.MixtureFile {
		o.Mixture, err = mixtureOptions(fl, data, mnt)
		o.Info = map[string]any{}
		return o, err
	}
	if kind == mount.Remote {
		if o.S3, err = f.s3.options(); err != nil {
			return o, err
		}
	}
	if f.disk.size != "auto" {
		if f.disk.dir == "" {
			return o, usagef("--disk-cache-size goes with --disk-cache DIR")
		}
		if o.DiskCacheSize, err = parseSize("disk-cache-size", f.disk.size); err != nil {
			return o, err
		}
		if o.DiskCacheSize == 0 {
			return o, usagef("--disk-cache-size 0 leaves no room for any file of the dataset; give a size, or auto")
		}
	}
	if o.InPlace, err = f.inPlace.options(kind); err != nil {
		return o, err
	}
	o.Info = map[string]any{"open_flags": f.inPlace.args()}
	return o, nil
}

// inPlaceFlags describe a file served in place (mount and order take them).
type inPlaceFlags struct {
	recordSize string
	blockSize  string
	offset     string
	records    uint64
	dtype      string
	shape      string // comma-separated dimensions; "" for none
	window     string // rows per window; "" for none
	stride     uint64
	segments   string
}

func (f *inPlaceFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.recordSize, "record-size", "", "record size, to serve a flat file of fixed-size records in place")
	fl.StringVar(&f.blockSize, "block-size", "auto", "logical block size of data served in place, and of windows; auto: 1 MiB (more for a file over 1 TiB, or to hold 4 windows), so the order can mix many blocks while each read stays large")
	fl.StringVar(&f.offset, "offset", "0", "where the records start in a raw file served in place (after a header)")
	fl.Uint64Var(&f.records, "records", 0, "how many records a raw file served in place holds from --offset (a trailer may follow); 0: the rest of the file")
	fl.StringVar(&f.dtype, "dtype", "", "numpy dtype of a raw file's elements (float32, uint16, \"<f4\", ...), for readers' typed arrays; the record size defaults to it times --shape")
	fl.StringVar(&f.shape, "shape", "", "with --dtype: the shape of one record, as 3,32,32 (default: one element)")
	fl.StringVar(&f.window, "window", "", "serve windows of this many consecutive rows of a file in place as records (time series)")
	fl.Uint64Var(&f.stride, "stride", 1, "with --window: rows between window starts")
	fl.StringVar(&f.segments, "segments", "", "with --window: a JSON file with an index_map of {start_row, end_row} (inclusive), in any order, or a .npy of segment start rows (int32 or int64); windows never cross a segment")
}

// options parses the flags into the mount package's description of a file in place, for data
// of the given kind (mount.Open refuses the flags that do not apply to it).
func (f inPlaceFlags) options(kind mount.Kind) (mount.InPlace, error) {
	var in mount.InPlace
	var err error
	if kind != mount.Remote && f.window == "" && (f.stride != 1 || f.segments != "") {
		return in, usagef("--stride and --segments go with --window")
	}
	if f.blockSize != "auto" {
		if in.BlockSize, err = parseSize("block-size", f.blockSize); err != nil {
			return in, err
		}
		if in.BlockSize == 0 {
			return in, usagef("--block-size must be at least %s (or auto)", ibytes(uint64(layout.MinBlockSize)))
		}
	}
	if f.recordSize != "" {
		if in.RecordSize, err = parseSize("record-size", f.recordSize); err != nil {
			return in, err
		}
		if in.RecordSize == 0 {
			return in, usagef("--record-size must be at least 1 byte")
		}
	}
	if in.Offset, err = parseSize("offset", f.offset); err != nil {
		return in, err
	}
	if f.records > math.MaxInt64 {
		return in, usagef("--records %d is too large", f.records)
	}
	in.Records, in.Segments, in.DType = int64(f.records), f.segments, f.dtype
	if f.shape != "" {
		for _, d := range strings.Split(f.shape, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(d), 10, 64)
			if err != nil || n < 1 {
				return in, usagef("--shape %s: give the dimensions of one record, each at least 1, as 3,32,32", f.shape)
			}
			in.Shape = append(in.Shape, n)
		}
	}
	if f.window != "" {
		window, err := strconv.ParseUint(f.window, 10, 31)
		if err != nil || window == 0 {
			return in, usagef("--window %s: give the rows per window, from 1 to %d", f.window, math.MaxInt32)
		}
		if f.stride == 0 || f.stride > math.MaxInt32 {
			return in, usagef("--stride %d: give the rows between window starts, from 1 to %d", f.stride, math.MaxInt32)
		}
		in.Window = int64(window)
	}
	in.Stride = int64(min(f.stride, math.MaxInt32+1))
	return in, nil
}

// openData opens the dataset data names (a directory, a file in place, an s3:// URL) with
// the in-place flags f and the object store flags s3f.
func openData(f inPlaceFlags, s3f *s3Flags, data string) (*layout.Dataset, error) {
	loc := mount.Locate(data)
	in, err := f.options(loc.Kind)
	if err != nil {
		return nil, err
	}
	var so s3.Options
	if loc.Kind == mount.Remote {
		if so, err = s3f.options(); err != nil {
			return nil, err
		}
	}
	return mount.Open(loc, in, so)
}

func runMount(fl *pflag.FlagSet, f mountFlags, data, mnt string) error {
	opt, err := f.options(fl, data, mnt)
	if err != nil {
		return err
	}
	plan, err := mount.New(opt)
	if err != nil {
		return err
	}
	for _, w := range plan.Warnings() {
		// Before --daemon detaches: the user (and blockfs.Mount) sees it on stderr.
		fmt.Fprintln(os.Stderr, "blockfs: warning: "+w)
	}
	if f.daemon && os.Getenv(readyFDEnv) == "" {
		return startDaemon(f.logFile, bfs.FuseFD(plan.Mountpoint()))
	}
	if err := setupLog(f.logFile); err != nil {
		return err
	}
	return plan.Serve(signalReady)
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

// waitReady is how long --daemon waits for the child to report.
const waitReady = 60 * time.Second

// orderOptions checks the order flags of mount and order and returns them as shuffle options
// (shuffle.Options.Validate has the rules). --mix auto is Mix 0, which mount.ChooseOrder
// resolves from the data; a number must be at least 1.
func orderOptions(seed, epoch uint64, mode string, mix string) (shuffle.Options, error) {
	m, err := shuffle.ParseMode(mode)
	if err != nil {
		return shuffle.Options{}, usagef("--shuffle: %v", err)
	}
	opt := shuffle.Options{Seed: seed, Epoch: epoch, Mode: m}
	if mix == "auto" {
		return opt, nil
	}
	k, err := strconv.Atoi(mix)
	if err != nil || k < 1 || k > shuffle.MaxMix {
		return opt, usagef("--mix %s is out of range (1 to %d, or auto)", mix, shuffle.MaxMix)
	}
	opt.Mix = k
	if err := opt.Validate(); err != nil {
		return opt, usagef("--mix %d: %v", k, err)
	}
	return opt, nil
}
