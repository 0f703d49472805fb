package mount

import (
	"log"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/diskcache"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/source/s3"
)

// stack is the sources below the page cache, bottom up: where the bytes come from (local
// files, or an object store), the disk cache in front of an object store, and the CRC32C check
// of --verify above them, so that no unchecked byte reaches the cache; all of them over the
// files as stored (the dataset's Stored), and on top what serves them (Served: compressed
// blocks decompressed, a frame at a time, each checked first).
type stack struct {
	src   source.Blocks
	disk  *diskcache.Blocks  // nil without a disk cache
	dir   string             // the disk cache's directory
	store func() s3.Counters // the object store's counters; nil for local data
	// compressed: src decompresses blocks (its layout.DecompressStats count it)
	compressed bool
}

// openSources builds the stack of sources the plan asks for. The caller closes it.
func (p *Plan) openSources() (*stack, error) {
	s := &stack{}
	ds := p.ds.Stored() // the files as stored: the pack's, for windows over a compressed one
	switch {
	case p.ds.ShardsInPlace():
		s.src = p.ds.Source() // the shards, read through their index
		if ss, ok := s.src.(*layout.ShardsSource); ok {
			if c, ok := ss.Shards().(interface{ Counters() s3.Counters }); ok {
				s.store = c.Counters // the field's own store (shardsBackend)
			}
		}
	case p.loc.Kind == Remote:
		s.src = p.ds.StoredSource() // the object store, checked by ETag and CRC32C
		if c, ok := s.src.(interface{ Counters() s3.Counters }); ok {
			s.store = c.Counters
		}
	case p.mem.Direct && p.mem.ResidentBlocks > 0:
		// The resident set's blocks are read buffered and stay in the kernel's page cache,
		// the others stream with O_DIRECT.
		s.src = local.NewStreaming(ds, p.streams())
	default:
		// Direct I/O: block data goes from the disk straight into the page-aligned cache,
		// cached once; buffered: the kernel keeps the block files too.
		s.src = local.New(ds, p.mem.Direct)
	}
	if p.disk != nil {
		dc, err := diskcache.Open(s.src, ds, *p.disk)
		if err != nil {
			return nil, err
		}
		s.src, s.disk, s.dir = dc, dc, p.disk.Dir
		st := dc.Stats()
		log.Printf("blockfs: disk cache %s: %s in %d files, bound %s; keeps %d of the dataset's files (a fixed set)",
			p.disk.Dir, ibytes(st.Used), st.Files, ibytes(dc.Limit()), dc.KeptFiles())
	}
	if p.opt.Verify {
		v, err := layout.NewVerified(ds, s.src)
		if err != nil {
			s.close()
			return nil, Usagef(flag("verify")+": %v", err)
		}
		s.src = v
	}
	s.src, s.compressed = p.ds.Served(s.src), p.ds.Compressed()
	return s, nil
}

// close closes the disk cache, logging its counters.
func (s *stack) close() {
	if s.disk == nil {
		return
	}
	st := s.disk.Stats()
	log.Printf("blockfs: disk cache %s: %d reads from disk, %d files fetched, %d evicted, %d bad (fetched again), %d not kept; %s in %d files",
		s.dir, st.Hits, st.Fetches, st.Evicted, st.Bad, st.WriteErr, ibytes(st.Used), st.Files)
	s.disk.Close()
}

// diskOptions checks the disk cache options for the plan and returns the disk cache's
// options, or nil without one. It creates nothing: Serve opens the cache.
func (p *Plan) diskOptions() (*diskcache.Options, error) {
	o := p.opt
	if o.DiskCache == "" {
		return nil, nil // Options.Check refused a size without it
	}
	if p.loc.Kind != Remote {
		return nil, Usagef(flag("disk-cache")+" is for a dataset in an object store (s3://); %s is read from local disk already", p.ds.Dir)
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
