package mount

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/blockfs/blockfs/source/objstore"

	"github.com/dustin/go-humanize"

	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/shuffle"
)

// The schema of a mount's options, declared once (rclone's OptionsInfo is the model): each
// option's name, type, default, help, scope and group, and how its text sets Options. The
// command line registers its flags from it (one flag per option, named as here), a mixture
// source's "options" decode through it (DecodeJSON), info.json records what was given
// (Values), and `blockfs options --json` publishes it for the Python package, which checks
// blockfs.Mount's keywords against it.

// Type is the kind of value an option takes, as the published schema names it.
type Type string

const (
	Bool     Type = "bool"     // true or false
	Int      Type = "int"      // a whole number, maybe negative
	Uint     Type = "uint"     // a whole number >= 0
	Size     Type = "size"     // bytes, with units: 4096, 64KiB, 16MiB, 1GiB (1024s) or 64KB (1000s)
	String   Type = "string"   // text
	Path     Type = "path"     // a file or directory (a mixture's: relative to the mixture file)
	Duration Type = "duration" // Go's form: 30s, 1m30s, 500ms
	Shape    Type = "shape"    // dimensions: 3,32,32 (a list of numbers in JSON)
	Enum     Type = "enum"     // one of Choices
)

// Scope says where an option may be given.
type Scope string

const (
	// PerMount options are the whole mount's, given once (on the command line).
	PerMount Scope = "mount"
	// PerSource options are a dataset's: a mixture's source may give its own in "options",
	// and the command line's value is every source's default.
	PerSource Scope = "source"
	// PerProcess options say how the command runs (in the background, where it logs), not
	// what it serves.
	PerProcess Scope = "process"
)

// Group is a set of options that commands other than mount take together.
type Group string

const (
	GroupInPlace Group = "in-place" // how to serve a file in place, and windows (mount, order, info)
	GroupOrder   Group = "order"    // the order: seed, shuffle, mix (mount, order)
	GroupStore   Group = "store"    // the object store (mount, info, verify, pack)
	GroupDisk    Group = "disk"     // the disk cache in front of an object store
	GroupMount   Group = "mount"    // the rest of the mount's own
)

// Option is one option of a mount.
type Option struct {
	Name    string   // the flag's name ("cache-size"); Key is the same with _ for -
	Type    Type     // its values
	Default string   // its default, as text ("auto", "0", "" for none)
	Help    string   // one line for --help
	Scope   Scope    // whose it is
	Group   Group    // the commands that take it
	Choices []string // an Enum's values
	Hidden  bool     // not listed in --help (a developer's option)

	set func(o *Options, text string) error // parses text (never "" for a given value) into o
}

// Key returns the option's name in JSON and Python: cache_size.
func (opt Option) Key() string { return strings.ReplaceAll(opt.Name, "-", "_") }

// Set parses text into o, as if the option were given with it. An error names the option
// and wraps ErrUsage.
func (opt Option) Set(o *Options, text string) error { return opt.set(o, text) }

// Schema returns every option of a mount, in the order --help lists them.
func Schema() []Option { return append([]Option(nil), schema...) }

// LookupOption returns the option of the given name (flag form "cache-size", or key form
// "cache_size").
func LookupOption(name string) (Option, bool) {
	name = strings.ReplaceAll(name, "_", "-")
	for _, opt := range schema {
		if opt.Name == name {
			return opt, true
		}
	}
	return Option{}, false
}

// optionErr is an error in the value of option name: a usage error (exit 2) that names it.
func optionErr(name, format string, args ...any) error {
	return usageError{optname.Errorf(name, format, args...)}
}

// flag names an option in a message.
func flag(name string) string {
	return optname.Flag(name)
}

var schema = []Option{
	{Name: "seed", Type: Uint, Default: "0", Scope: PerSource, Group: GroupOrder, Help: "shuffle seed",
		set: func(o *Options, s string) error { return parseUint("seed", s, math.MaxUint64, &o.Order.Seed) }},
	{Name: "shuffle", Type: Enum, Default: "full", Scope: PerSource, Group: GroupOrder, Choices: []string{"full", "blocks", "none"},
		Help: "order: full (blocks and records shuffled), blocks (blocks shuffled, records in stored order), none",
		set: func(o *Options, s string) (err error) {
			if o.Order.Mode, err = shuffle.ParseMode(s); err != nil {
				return optionErr("shuffle", "%s: %v", flag("shuffle"), err)
			}
			return nil
		}},
	{Name: "mix", Type: Uint, Default: "auto", Scope: PerSource, Group: GroupOrder, set: setMix,
		Help: "shuffle records across windows of K consecutive blocks (full only; needs K x block size of cache); auto: 1 on data pack pre-shuffled, else windows of 512 MiB of blocks (the whole data when smaller)"},
	{Name: "order-version", Type: Uint, Default: strconv.Itoa(shuffle.CurrentVersion), Scope: PerSource, Group: GroupOrder,
		Help: "the order's version, 1 or 2 (docs/SHUFFLE.md): 2 permutes windows of more than 2^22 records in constant memory, so tiny records are shuffled across 512 MiB windows; 1 is the order of blockfs before it (the same bytes wherever no window is that large)",
		set: func(o *Options, s string) error {
			v, err := strconv.Atoi(s)
			if err != nil || v < shuffle.Version1 || v > shuffle.CurrentVersion {
				return optionErr("order-version", "%s %q: want 1 or 2", flag("order-version"), s)
			}
			o.Order.Version = v
			return nil
		}},
	{Name: "index", Type: Path, Default: "", Scope: PerMount, Group: GroupMount,
		Help: "shards served in place (a folder, glob or s3://, gs:// or az:// prefix of .tar or .tfrecord files): keep their index in this directory (made at the first mount, again when the shards change); default: under the user's cache directory",
		set:  func(o *Options, s string) error { o.Index = s; return nil }},
	{Name: "epochs", Type: Uint, Default: strconv.Itoa(bfs.DefaultEpochs), Scope: PerMount, Group: GroupMount,
		Help: "epoch files listed by ls (any epoch number can be opened)",
		set: func(o *Options, s string) error {
			err := parseUint("epochs", s, math.MaxUint64, &o.Epochs)
			if err == nil && (o.Epochs == 0 || o.Epochs > bfs.MaxEpochs) {
				err = optionErr("epochs", "%s %d is out of range (1 to %d; it is how many epochs ls lists, and any epoch can be opened by name)", flag("epochs"), o.Epochs, bfs.MaxEpochs)
			}
			return err
		}},
	{Name: "cache-size", Type: Size, Default: "auto", Scope: PerMount, Group: GroupMount,
		Help: "memory budget for data: the daemon's cache plus the blocks kept resident in the kernel's page cache; auto: the memory (RAM or the cgroup's limit) less a quarter for the trainer and what other mounts took",
		set:  func(o *Options, s string) error { return parseSizeOr("cache-size", s, 0, &o.CacheSize) }},
	{Name: "direct", Type: Enum, Default: "auto", Scope: PerMount, Group: GroupMount, Choices: []string{"auto", "on", "off"},
		Help: "read blocks with O_DIRECT: on (all, into the cache), off (none), or auto (the blocks outside the resident set)",
		set: func(o *Options, s string) (err error) {
			if o.Direct, err = memory.ParseDirect(s); err != nil {
				return optionErr("direct", "%s: %v", flag("direct"), err)
			}
			return nil
		}},
	{Name: "readahead", Type: Size, Default: "auto", Scope: PerMount, Group: GroupMount,
		Help: "bytes of the epoch order prefetched ahead of each reader (0 disables); auto: " + ibytes(DefaultReadahead) + ", or from an object store enough to keep " + flag("s3-concurrency") + " GETs in flight",
		set:  func(o *Options, s string) error { return parseSizeOr("readahead", s, AutoReadahead, &o.Readahead) }},
	{Name: "daemon", Type: Bool, Default: "false", Scope: PerProcess, Group: GroupMount,
		Help: "run in the background; return once the mount is ready",
		set:  func(o *Options, s string) error { return parseBool("daemon", s, &o.Daemon) }},
	{Name: "allow-other", Type: Bool, Default: "false", Scope: PerMount, Group: GroupMount,
		Help: "let other users read the mount (non-root needs user_allow_other in /etc/fuse.conf); refused when other users cannot read the dataset's files themselves",
		set:  func(o *Options, s string) error { return parseBool("allow-other", s, &o.AllowOther) }},
	{Name: "allow-other-unreadable", Type: Bool, Default: "false", Scope: PerMount, Group: GroupMount,
		Help: "with " + flag("allow-other") + ": serve data whose files other users cannot read themselves (or in an object store) to every user anyway",
		set: func(o *Options, s string) error {
			return parseBool("allow-other-unreadable", s, &o.AllowOtherUnreadable)
		}},
	{Name: "debug", Type: Bool, Default: "false", Scope: PerMount, Group: GroupMount, Help: "log every FUSE request",
		set: func(o *Options, s string) error { return parseBool("debug", s, &o.Debug) }},
	{Name: "log", Type: Path, Default: "", Scope: PerProcess, Group: GroupMount,
		Help: "append log lines to this file, not a symlink (mode 0600; past 1 MiB it becomes FILE.1 and a new one starts; /dev/null: none; default: stderr; with " + flag("daemon") + ", a file of the daemon's own, which info.json's \"log\" names)",
		set:  func(o *Options, s string) error { o.Log = s; return nil }},
	{Name: "users-lock", Type: Path, Default: "", Scope: PerMount, Group: GroupMount,
		Help: "unmount and exit within a second once no process holds a POSIX (fcntl) lock on this file (blockfs.Mount's users each hold one)",
		set:  func(o *Options, s string) error { o.UsersLock = s; return nil }},
	{Name: "remove-mountpoint", Type: Bool, Default: "false", Scope: PerMount, Group: GroupMount,
		Help: "with " + flag("users-lock") + ": remove the mountpoint and the lock files when the last user is gone",
		set:  func(o *Options, s string) error { return parseBool("remove-mountpoint", s, &o.RemoveMountpoint) }},
	{Name: "shm", Type: Bool, Default: "true", Scope: PerMount, Group: GroupMount,
		Help: "offer the shared-memory read path (docs/SHM.md), through which blockfs.torch.Loader reads batches from the cache without FUSE; false: every reader uses the files",
		set: func(o *Options, s string) error {
			var on bool
			err := parseBool("shm", s, &on)
			o.NoShm = !on
			return err
		}},
	{Name: "verify", Type: Bool, Default: "false", Scope: PerSource, Group: GroupMount,
		Help: "check each block file's CRC32C the first time it is read; a block that fails reads as EIO",
		set:  func(o *Options, s string) error { return parseBool("verify", s, &o.Verify) }},
}

func init() {
	schema = append(schema, inPlaceSchema...)
	schema = append(schema, storeSchema...)
	schema = append(schema, nodeSchema...)
}

// parseBool parses a boolean's text as the flag package does (true, false, 1, 0, t, f).
func parseBool(name, s string, dst *bool) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return optionErr(name, "%s %q: want true or false", flag(name), s)
	}
	*dst = b
	return nil
}

// parseUint parses a whole number from 0 to most.
func parseUint(name, s string, most uint64, dst *uint64) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n > most {
		return optionErr(name, "%s %q: want a whole number from 0 to %d", flag(name), s, most)
	}
	*dst = n
	return nil
}

// parseInt parses a whole number from least to most.
func parseInt(name, s string, least, most int64, dst *int) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < least || n > most {
		return optionErr(name, "%s %s is out of range (%d to %d)", flag(name), s, least, most)
	}
	*dst = int(n)
	return nil
}

// ParseSize reads a byte count with an optional unit: 4096, 64KiB, 16MiB, 1GiB (powers of
// 1024) or 64KB, 16MB (powers of 1000). name is the option the error names.
func ParseSize(name, s string) (int64, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "-") {
		return 0, optionErr(name, "%s %s: must not be negative", flag(name), s)
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, optionErr(name, "%s %q is not a size (use bytes or units such as 64KiB, 16MiB, 1GiB)", flag(name), s)
	}
	if n > math.MaxInt64/2 {
		return 0, optionErr(name, "%s %s is too large", flag(name), s)
	}
	return int64(n), nil
}

// parseSizeOr parses a size, or "auto" as auto.
func parseSizeOr(name, s string, auto int64, dst *int64) (err error) {
	if s == "auto" {
		*dst = auto
		return nil
	}
	*dst, err = ParseSize(name, s)
	return err
}

// ParseDuration parses a duration in Go's form (500ms, 1m30s) or a number of seconds (30,
// 0.5), as Python's Mount passes them.
func ParseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && math.Abs(f) < 1e9 {
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(s)
}

// parseDuration parses a positive duration (ParseDuration).
func parseDuration(name, s string, dst *time.Duration) error {
	d, err := ParseDuration(s)
	if err != nil {
		return optionErr(name, "%s %q is not a duration (seconds, or with units such as 500ms, 30s, 2m)", flag(name), s)
	}
	if d <= 0 {
		return optionErr(name, "%s %v must be positive", flag(name), d)
	}
	*dst = d
	return nil
}

// setMix parses --mix: auto is Mix 0, which ChooseOrder resolves from the data; a number
// must be at least 1.
func setMix(o *Options, s string) error {
	if s == "auto" {
		o.Order.Mix = 0
		return nil
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 1 || k > shuffle.MaxMix {
		return optionErr("mix", "%s %s is out of range (1 to %d, or auto)", flag("mix"), s, shuffle.MaxMix)
	}
	o.Order.Mix = k
	if err := o.Order.Validate(); err != nil {
		return optionErr("mix", "%s %d: %v", flag("mix"), k, err)
	}
	return nil
}

var storeSchema = []Option{
	{Name: "endpoint", Type: String, Default: "", Scope: PerSource, Group: GroupStore,
		Help: "the object store's endpoint URL, e.g. http://127.0.0.1:9000 (s3:// default: $AWS_ENDPOINT_URL, else AWS S3; gs:// default: $STORAGE_EMULATOR_HOST, else Google's; az://: an emulator's, e.g. Azurite's http://127.0.0.1:10000)",
		set:  func(o *Options, s string) error { o.S3.Endpoint = s; return nil }},
	{Name: "s3-concurrency", Type: Int, Default: strconv.Itoa(objstore.DefaultConcurrency), Scope: PerSource, Group: GroupStore,
		Help: "s3://, gs://, az://, https://: requests in flight at once (ranged GETs, part uploads)",
		set:  func(o *Options, s string) error { return parseInt("s3-concurrency", s, 1, 256, &o.S3.Concurrency) }},
	{Name: "s3-part-size", Type: Size, Default: ibytes(objstore.DefaultPartSize), Scope: PerSource, Group: GroupStore,
		Help: "s3://, gs://, az://, https://: the largest ranged GET, and pack's multipart part size (at least 5MiB)",
		set: func(o *Options, s string) (err error) {
			if o.S3.PartSize, err = ParseSize("s3-part-size", s); err != nil {
				return err
			}
			if o.S3.PartSize < objstore.MinPartSize || o.S3.PartSize > 5<<30 {
				return optionErr("s3-part-size", "%s %s is out of range (5 MiB, the S3 minimum part, to 5 GiB)", flag("s3-part-size"), s)
			}
			return nil
		}},
	{Name: "s3-timeout", Type: Duration, Default: objstore.DefaultTimeout.String(), Scope: PerSource, Group: GroupStore,
		Help: "s3://, gs://, az://, https://: time limit of one request, body included (a slow transfer)",
		set:  func(o *Options, s string) error { return parseDuration("s3-timeout", s, &o.S3.Timeout) }},
	{Name: "s3-stall-timeout", Type: Duration, Default: objstore.DefaultStallTimeout.String(), Scope: PerSource, Group: GroupStore,
		Help: "s3://, gs://, az://, https://: a request that makes no progress (no answer, no byte) for this long fails and is retried; a store silent for (retries+1) times this gives EIO at once",
		set:  func(o *Options, s string) error { return parseDuration("s3-stall-timeout", s, &o.S3.StallTimeout) }},
	{Name: "s3-retries", Type: Int, Default: strconv.Itoa(objstore.DefaultRetries), Scope: PerSource, Group: GroupStore,
		Help: "s3://, gs://, az://, https://: retries of a failed request (5xx, throttling, reset, timeout, stall), with backoff; then EIO",
		set: func(o *Options, s string) error {
			err := parseInt("s3-retries", s, 0, 100, &o.S3.Retries)
			if err == nil && o.S3.Retries == 0 {
				o.S3.Retries = -1 // objstore.Options' default is for the zero value; -1 asks for none
			}
			return err
		}},
	{Name: "disk-cache", Type: Path, Default: "", Scope: PerSource, Group: GroupDisk,
		Help: "s3://, gs://, az://, https://: keep fetched block files in this local directory, reused across epochs and remounts (checked by CRC32C on every reuse)",
		set:  func(o *Options, s string) error { o.DiskCache = s; return nil }},
	{Name: "disk-cache-size", Type: Size, Default: "auto", Scope: PerSource, Group: GroupDisk,
		Help: "s3://, gs://, az://, https://: bound on the " + flag("disk-cache") + " directory (least recently used files go); auto: the dataset's size, or what the filesystem has free",
		set: func(o *Options, s string) error {
			if err := parseSizeOr("disk-cache-size", s, 0, &o.DiskCacheSize); err != nil || s == "auto" {
				return err
			}
			if o.DiskCacheSize == 0 {
				return optionErr("disk-cache-size", "%s 0 leaves no room for any file of the dataset; give a size, or auto", flag("disk-cache-size"))
			}
			return nil
		}},
}

var nodeSchema = []Option{
	{Name: "nodes", Type: Int, Default: "0", Scope: PerMount, Group: GroupMount,
		Help: "the job's node count (torchrun's --nnodes): serve only this node's canonical parts of the data, the same every epoch, so a node's disk and page caches keep what it reads (docs/SHUFFLE.md, \"Many nodes\"); 0: the whole data",
		set:  func(o *Options, s string) error { return parseCount("nodes", s, &o.Nodes.Nodes) }},
	{Name: "node", Type: Int, Default: "0", Scope: PerMount, Group: GroupMount,
		Help: "with " + flag("nodes") + ": this node, 0 to nodes-1 (torchrun's --node_rank, Slurm's $SLURM_NODEID)",
		set: func(o *Options, s string) error {
			return parseInt("node", s, math.MinInt32, math.MaxInt32, &o.Nodes.Node)
		}},
	{Name: "parts", Type: Int, Default: "0", Scope: PerMount, Group: GroupMount,
		Help: "with " + flag("nodes") + ": the canonical parts the blocks are dealt to, a multiple of every node count the job may run at (default: 48, or fewer for data of fewer than 192 blocks: at least 4 blocks a part)",
		set:  func(o *Options, s string) error { return parseCount("parts", s, &o.Nodes.Parts) }},
	{Name: "cpuprofile", Type: Path, Default: "", Scope: PerProcess, Group: GroupMount, Hidden: true,
		Help: "write a CPU profile of the daemon (pprof format) to this file at unmount",
		set:  func(o *Options, s string) error { o.CPUProfile = s; return nil }},
	{Name: "max-background", Type: Int, Default: strconv.Itoa(bfs.DefaultMaxBackground), Scope: PerProcess, Group: GroupMount, Hidden: true,
		Help: "FUSE requests the kernel keeps in flight for readahead (max_background; its congestion threshold is three quarters of it)",
		set: func(o *Options, s string) error {
			return parseInt("max-background", s, 1, 65535, &o.MaxBackground)
		}},
	{Name: "fuse-readers", Type: Int, Default: "0", Scope: PerProcess, Group: GroupMount, Hidden: true,
		Help: "FUSE requests the daemon serves at once, at most one a CPU and 16 (0: that many)",
		set: func(o *Options, s string) error {
			return parseInt("fuse-readers", s, 0, 16, &o.FuseReaders)
		}},
	{Name: "metrics", Type: String, Default: "", Scope: PerMount, Group: GroupMount,
		Help: "serve Prometheus metrics at http://ADDR/metrics (ADDR is HOST:PORT, e.g. 127.0.0.1:9560; off by default)",
		set:  func(o *Options, s string) error { o.Metrics = s; return nil }},
	{Name: "metrics-allow-remote", Type: Bool, Default: "false", Scope: PerMount, Group: GroupMount,
		Help: "with " + flag("metrics") + ": allow an address other than loopback (the metrics are then served to the network)",
		set:  func(o *Options, s string) error { return parseBool("metrics-allow-remote", s, &o.MetricsRemote) }},
}

// parseCount parses --nodes or --parts: a count, 0 for none.
func parseCount(name, s string, dst *int) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return optionErr(name, "%s %q: want a whole number", flag(name), s)
	}
	if n < 0 {
		return optionErr(name, "%s %d: need a positive count", flag(name), n)
	}
	*dst = int(n)
	return nil
}
