package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/mount/daemon"
	"github.com/blockfs/blockfs/shuffle"
)

func newMount() *cobra.Command {
	vals := mount.Values{}
	c := &cobra.Command{
		Use:   "mount [flags] DATA MOUNTPOINT",
		Short: "Mount a dataset as block-shuffled epoch files",
		Long: `mount serves DATA read-only at MOUNTPOINT. DATA is a dataset made by blockfs pack (a
directory, or s3://BUCKET/PREFIX with the object store flags), an index of shards made by
blockfs index, WebDataset or TFRecord shards themselves (a folder, a quoted glob or an s3://
prefix: indexed on the first mount, served in place), a mixture file of datasets (.json with
"sources"), or an existing file served in place with no copy: a .npy file, or a flat file of
fixed-size records with --record-size; its blocks are then consecutive ranges of --block-size
of the file.
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
		RunE: func(c *cobra.Command, args []string) error { return mountRun(vals, args[0], args[1]) },
	}
	registerOptions(c.Flags(), vals)
	return c
}

// inPlaceFlags are the options of a file served in place (order and info take them too).
type inPlaceFlags struct{ vals mount.Values }

func (f *inPlaceFlags) register(fl *pflag.FlagSet) {
	if f.vals == nil {
		f.vals = mount.Values{}
	}
	registerOptions(fl, f.vals, mount.GroupInPlace)
}

// mountRun runs blockfs mount with the options given (tests replace it to see them).
var mountRun = runMount

func runMount(vals mount.Values, data, mnt string) error {
	opt, err := decodeOptions(data, mnt, vals)
	if err != nil {
		return err
	}
	// The process that serves records its claim of memory as it plans; with --daemon the
	// parent only checks, and the daemon it starts plans again and serves.
	opt.RecordClaim = !opt.Daemon || os.Getenv(readyFDEnv) != ""
	var own *daemon.Log
	if opt.Log == "" && os.Getenv(readyFDEnv) != "" {
		// The daemon, with no terminal: its own log (info.json names it), or none if this
		// user has no private place for one.
		if path, err := daemon.DaemonLog(); err == nil {
			if own, err = daemon.OpenDaemonLog(path); err == nil {
				opt.Log = path
			}
		}
	} else if opt.Log != "" {
		if opt.Log, err = filepath.Abs(opt.Log); err != nil {
			return fmt.Errorf("--log: %w", err)
		}
	}
	plan, err := mount.New(opt)
	if err != nil {
		return err
	}
	for _, w := range plan.Warnings() {
		// Before --daemon detaches: the user (and blockfs.Mount) sees it on stderr.
		fmt.Fprintln(os.Stderr, "blockfs: warning: "+w)
	}
	if opt.Daemon && os.Getenv(readyFDEnv) == "" {
		return startDaemon(opt.Log, plan.FuseFD())
	}
	if err := setupLog(opt.Log, own); err != nil {
		return err
	}
	return plan.Serve(signalReady)
}

// setupLog sends log lines to own (the daemon's own log, bounded: its standard error too, for
// a panic's stack), or to path (appending, bounded as own is), or leaves them on stderr.
func setupLog(path string, own *daemon.Log) error {
	log.SetFlags(log.LstdFlags)
	if own != nil {
		log.SetOutput(own)
		_ = own.Stderr()
		return nil
	}
	if path == "" {
		if os.Getenv(readyFDEnv) != "" {
			log.SetOutput(io.Discard)
		}
		return nil
	}
	switch path {
	case os.DevNull:
		log.SetOutput(io.Discard)
		return nil
	case "/dev/stderr":
		return nil
	}
	// As the daemon's own log: no symlink followed (one planted where the log goes would have
	// the daemon append to whatever it points at), no FIFO waited on, bounded (the oldest half
	// kept as path.1).
	f, err := daemon.OpenDaemonLog(path)
	if err != nil {
		return fmt.Errorf("--log %s: %w", path, err)
	}
	log.SetOutput(f)
	return nil
}

// waitReady is how long --daemon waits for the child to report.
const waitReady = 60 * time.Second

// orderOptions checks the order options of mount and order and returns them as shuffle
// options for epoch (mount.Decode has the rules). --mix auto is Mix 0, which
// mount.ChooseOrder resolves from the data.
func orderOptions(seed, epoch uint64, mode, mix, version string) (shuffle.Options, error) {
	o, err := mount.Decode("", "", mount.Values{"seed": strconv.FormatUint(seed, 10), "shuffle": mode, "mix": mix, "order-version": version})
	o.Order.Epoch = epoch
	return o.Order, err
}
