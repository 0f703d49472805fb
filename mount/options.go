package mount

import (
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/s3"
)

// Options is everything a mount is asked for: what blockfs mount's flags say. Zero fields
// take the stated defaults.
type Options struct {
	Data       string          // the dataset: a directory, a file served in place, or s3://BUCKET/PREFIX
	Mountpoint string          // an existing empty directory outside the dataset
	InPlace    InPlace         // how to serve a file in place, and windows over rows
	Order      shuffle.Options // seed, mode and mix (Epoch is ignored); Mix 0: ChooseOrder's
	Epochs     uint64          // epoch files listed; default fs.DefaultEpochs, at most fs.MaxEpochs
	CacheSize  int64           // the memory budget for data (--cache-size); 0: from the memory the process has
	Direct     Direct          // O_DIRECT for block reads; default DirectAuto
	// Readahead is the bytes of epoch order prefetched ahead of each reader; 0 disables it;
	// AutoReadahead: DefaultReadahead, or from an object store enough to keep
	// S3.Concurrency GETs in flight.
	Readahead     int64
	S3            s3.Options // the object store's options (s3:// data)
	DiskCache     string     // s3://: keep fetched block files in this directory; "" for none
	DiskCacheSize int64      // bound on DiskCache; 0: the dataset's size, or 90% of what is free
	Verify        bool       // check each file's CRC32C the first time it is read
	AllowOther    bool       // let other users read the mount (checkAllowOther: data they can read)
	Debug         bool       // log every FUSE request
	CPUProfile    string     // write a CPU profile here at unmount
	// Metrics, if set, is the address (HOST:PORT) of a Prometheus endpoint; MetricsRemote lets
	// it be other than loopback.
	Metrics       string
	MetricsRemote bool
	// UsersLock, if set, is a file on which the mount's users hold POSIX locks: the mount ends
	// itself once none does (users.go). RemoveMountpoint then removes the mountpoint too.
	UsersLock        string
	RemoveMountpoint bool
	Info             map[string]any // more facts for .blockfs/info.json (the command line's own)
	// Mixture, when set, makes the mount a mixture of its sources (Data names the mixture
	// file; InPlace must be empty: each source has its own).
	Mixture *Mixture
	// Nodes, when Nodes.Nodes > 0, serves this node's canonical parts of the data (nodes.go).
	Nodes Nodes

	// AllowOtherUnreadable lets AllowOther serve data whose files other users cannot read
	// themselves (or data in an object store); without it such a mount is refused.
	AllowOtherUnreadable bool
}

// AutoReadahead asks for the default readahead (Options.Readahead).
const AutoReadahead = -1

// DefaultReadahead is the readahead of a mount of local data.
const DefaultReadahead = 64 << 20
