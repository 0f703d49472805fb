package mount

import (
	"context"
	"maps"
	"path/filepath"
	"strings"

	"github.com/blockfs/blockfs/internal/infiles"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source/objstore"

	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/mount/report"
	"github.com/blockfs/blockfs/shuffle"
)

// Options is everything a mount is asked for: what blockfs mount's flags say. Zero fields
// take the stated defaults.
type Options struct {
	Data       string          // the dataset: a directory, a file served in place, or s3://BUCKET/PREFIX
	Mountpoint string          // an existing empty directory outside the dataset
	InPlace    InPlace         // how to serve a file in place, and windows over rows
	Order      shuffle.Options // seed, mode and mix (Epoch is ignored); Mix 0: ChooseOrder's
	Epochs     uint64          // epoch files listed; default fs.DefaultEpochs, at most fs.MaxEpochs
	// RecordClaim: the process will serve the plan (the daemon): New plans under the
	// registry's planning lock and records the plan's claim of memory before it returns.
	RecordClaim bool
	CacheSize   int64         // the memory budget for data (--cache-size); 0: from the memory the process has
	Direct      memory.Direct // O_DIRECT for block reads; default memory.DirectAuto
	// Readahead is the bytes of epoch order prefetched ahead of each reader; 0 disables it;
	// AutoReadahead: DefaultReadahead, or from an object store enough to keep
	// S3.Concurrency GETs in flight.
	Readahead int64
	S3        objstore.Options // the object store's options (s3:// data)
	DiskCache string           // s3://: keep fetched block files in this directory; "" for none
	// Index is where the index of shards served in place is kept (shards.go); "": under the
	// user's cache directory.
	Index string
	// Indexer indexes shards served in place that have no index yet (pack.IndexInPlace;
	// nil: such shards are refused, saying how to index them).
	Indexer       Indexer
	DiskCacheSize int64  // bound on DiskCache; 0: the dataset's size, or 90% of what is free
	Verify        bool   // check each file's CRC32C the first time it is read
	NoShm         bool   // offer no shared-memory read path (--shm=false)
	AllowOther    bool   // let other users read the mount (checkAllowOther: data they can read)
	Debug         bool   // log every FUSE request
	CPUProfile    string // write a CPU profile here at unmount
	MaxBackground int    // the kernel's FUSE requests in flight for readahead
	FuseReaders   int    // FUSE requests served at once (0: go-fuse's, one a CPU up to 16)
	// Metrics, if set, is the address (HOST:PORT) of a Prometheus endpoint; MetricsRemote lets
	// it be other than loopback.
	Metrics       string
	MetricsRemote bool
	// UsersLock, if set, is a file on which the mount's users hold POSIX locks: the mount ends
	// itself once none does (users.go). RemoveMountpoint then removes the mountpoint too.
	UsersLock        string
	RemoveMountpoint bool
	// Given is the options as they were given (by name, as text): info.json records them,
	// and a mixture's sources take the command line's per-source ones as their defaults.
	Given Values
	// Daemon and Log are how the command runs (PerProcess): in the background, and where
	// it logs. Serve does not read them.
	Daemon bool
	Log    string
	// Mixture, when set, makes the mount a mixture of its sources (Data names the mixture
	// file; InPlace must be empty: each source has its own).
	Mixture *Mixture
	// Nodes, when Nodes.Nodes > 0, serves this node's canonical parts of the data (nodes.go).
	Nodes Nodes

	// AllowOtherUnreadable lets AllowOther serve data whose files other users cannot read
	// themselves (or data in an object store); without it such a mount is refused.
	AllowOtherUnreadable bool
}

// An Indexer indexes shards of a format (infiles.WebDataset, infiles.TFRecord) whose names
// (ListShards) are relative to at into the directory out, replacing what is there, and returns
// the index it wrote. The packer implements it, so that a mount links no packer.
type Indexer func(ctx context.Context, format, at string, shards []infiles.Shard, out string) (*layout.ShardsIndex, error)

// AutoReadahead asks for the default readahead (Options.Readahead).
const AutoReadahead = -1

// DefaultReadahead is the readahead of a mount of local data.
const DefaultReadahead = 64 << 20

// Values are options given by name (the schema's, "cache-size") as text, as the command line
// and blockfs.Mount give them.
type Values map[string]string

// Decode returns the options of a mount of data at mnt with the given values over the
// schema's defaults, checked one by one (each error names its option and wraps ErrUsage) and
// together (Options.Check). An unknown name is an error.
func Decode(data, mnt string, given Values) (Options, error) {
	o := Options{Data: data, Mountpoint: mnt, Given: maps.Clone(given)}
	for name := range given {
		if _, ok := LookupOption(name); !ok {
			return o, Usagef("unknown option %q (see blockfs options)", name)
		}
	}
	for _, opt := range schema {
		text, ok := given[opt.Name]
		if !ok {
			text = opt.Default
		}
		if text == "" {
			continue // no value: the zero one
		}
		if err := opt.set(&o, text); err != nil {
			return o, err
		}
	}
	kind := Locate(data).Kind
	if err := o.check(kind); err != nil {
		return o, err
	}
	if kind == MixtureFile {
		var err error
		o.Mixture, err = ReadMixture(data, given)
		return o, err
	}
	return o, nil
}

// Check checks the options that go together, and those a kind of data refuses (Decode and
// New call it: one place for the rules).
func (o *Options) Check() error { return o.check(Locate(o.Data).Kind) }

// check is Check for data of kind (Decode has located it already).
func (o *Options) check(kind Kind) error {
	switch {
	case o.Epochs > bfs.MaxEpochs:
		return optionErr("epochs", "%s %d is out of range (1 to %d; it is how many epochs ls lists, and any epoch can be opened by name)", flag("epochs"), o.Epochs, bfs.MaxEpochs)
	case o.Nodes.Nodes == 0 && (o.Nodes.Node != 0 || o.Nodes.Parts != 0):
		return optionErr("nodes", "%s and %s go with %s N (the job's node count)", flag("node"), flag("parts"), flag("nodes"))
	case o.AllowOtherUnreadable && !o.AllowOther:
		return optionErr("allow-other-unreadable", "%s goes with %s", flag("allow-other-unreadable"), flag("allow-other"))
	case o.MetricsRemote && o.Metrics == "":
		return optionErr("metrics-allow-remote", "%s goes with %s ADDR", flag("metrics-allow-remote"), flag("metrics"))
	case o.DiskCacheSize != 0 && o.DiskCache == "":
		return optionErr("disk-cache-size", "%s goes with %s DIR", flag("disk-cache-size"), flag("disk-cache"))
	case kind != Remote && o.InPlace.Window == 0 && (o.InPlace.Stride > 1 || o.InPlace.Segments != ""):
		return optionErr("stride", "%s and %s go with %s", flag("stride"), flag("segments"), flag("window"))
	case o.Nodes.Nodes > 0 && (kind == MixtureFile || kind == FieldsDir || o.Mixture != nil):
		return optionErr("nodes", "%s is for one dataset; %s is a mixture or a dataset with fields, which are not node-aware yet: mount it whole on each node", flag("nodes"), o.Data)
	}
	if o.Metrics != "" {
		if err := report.CheckAddr(o.Metrics, o.MetricsRemote); err != nil {
			return usageError{err} // an option's error, which the options' errors wrap ErrUsage
		}
	}
	return nil
}

// In returns the values given of the options of scope.
func (v Values) In(scope Scope) Values {
	out := Values{}
	for name, text := range v {
		if opt, ok := LookupOption(name); ok && opt.Scope == scope {
			out[name] = text
		}
	}
	return out
}

// OpenArgs returns the in-place options given, as "--name=value" in the schema's order, for a
// mount's info.json (open_flags): blockfs order and info given the mountpoint open the same
// data with them. A relative --segments is made absolute.
func (v Values) OpenArgs() []string {
	a := []string{}
	for _, opt := range schema {
		text, ok := v[opt.Name]
		if opt.Group != GroupInPlace || (!ok && opt.Name != "block-size") {
			continue
		}
		if !ok {
			text = opt.Default
		}
		if opt.Type == Path {
			if abs, err := filepath.Abs(text); err == nil {
				text = abs
			}
		}
		a = append(a, flag(opt.Name)+"="+text)
	}
	return a
}

// Keyed returns the values by key (cache_size), as info.json records them.
func (v Values) Keyed() map[string]string {
	out := make(map[string]string, len(v))
	for name, text := range v {
		out[strings.ReplaceAll(name, "-", "_")] = text
	}
	return out
}
