package mount

import (
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/source/diskcache"
	"github.com/blockfs/blockfs/source/stack"
)

// openSources builds the stack of sources below the cache that the plan asks for
// (source/stack): local files read as the memory plan says, or the object store (or a field's
// shards in place, through their index), then the disk cache, then --verify's check, and what
// serves the files as stored as the dataset's. The caller closes it.
func (p *Plan) openSources() (*stack.Stack, error) {
	o := stack.Options{Disk: p.disk, Verify: p.opt.Verify}
	if p.loc.Kind != Remote {
		o.Local = &stack.Local{Direct: p.mem.Direct}
		if p.mem.Direct && p.mem.ResidentBlocks > 0 {
			// The resident set's blocks are read buffered and stay in the kernel's page cache,
			// the others stream with O_DIRECT.
			o.Local.Streams = p.streams()
		}
		if p.grows && p.opt.Direct != memory.DirectOff && p.mem.ResidentBlocks > 0 {
			// The cache may grow into the resident set's share for readers at once (grow.go):
			// the blocks it gives up stream then.
			o.Local.Streams = p.cutStreams(p.streams())
		}
	}
	return stack.Build(p.ds, o) // New checked that --verify can be done (Verifiable)
}

// diskOptions checks the disk cache options for the plan and returns the disk cache's
// options, or nil without one. It creates nothing: Serve opens the cache.
func (p *Plan) diskOptions() (*diskcache.Options, error) {
	o := p.opt
	if o.DiskCache == "" {
		return nil, nil // Options.Check refused a size without it
	}
	if p.loc.Kind != Remote {
		return nil, Usagef(flag("disk-cache")+" is for a dataset in a store (s3://, gs://, az://, https://); %s is read from local disk already", p.ds.Dir)
	}
	dir, err := filepath.Abs(o.DiskCache)
	if err != nil {
		return nil, Usagef(flag("disk-cache")+" %s: %v", o.DiskCache, err)
	}
	if userfile.Within(p.mnt, dir) || userfile.Within(dir, p.mnt) {
		return nil, Usagef(flag("disk-cache")+" %s and the mount point %s must not be inside one another", o.DiskCache, p.mnt)
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, Usagef(flag("disk-cache")+" %s is not a directory", o.DiskCache)
	}
	ds := p.ds.Stored()
	var total, largest int64 // the dataset's files, as stored
	for id := layout.FileID(0); id <= layout.NamesFile(ds.Blocks()); id++ {
		n := ds.StoredSize(id)
		total += n
		largest = max(largest, n)
	}
	size, auto := o.DiskCacheSize, o.DiskCacheSize == 0
	if auto {
		size = min(total, diskcache.Room(dir))
	}
	if size < largest {
		why := ""
		if auto {
			why = " (auto: the filesystem's free space)"
		}
		return nil, Usagef(flag("disk-cache-size")+" %s is smaller than the dataset's largest file (%s)%s; raise it, or free space under %s",
			ibytes(size), ibytes(largest), why, o.DiskCache)
	}
	do := &diskcache.Options{Dir: dir, Size: size, Namespace: ds.Manifest.Fingerprint(), Files: layout.NamesFile(ds.Blocks()) + 1}
	if p.nodes != nil {
		do.Keep = p.nodes.keep(p.ds)
	}
	return do, nil
}
