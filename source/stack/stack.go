// Package stack builds what lies below the page cache for a dataset, in one place: the backend
// its files are read from (local files, an object store, shards in place), the disk cache in
// front of an object store, the CRC32C check of --verify, and the layers that turn files as
// stored into files as served (compressed frames decompressed, windows' rows over a
// compressed pack, a node's parts of one dataset). Each layer is one file of this package and
// knows only the source.Blocks below it; Build stacks them and keeps each one's typed handle
// for its counters, so nobody finds a layer by asserting on a type.
//
// The stack of one dataset, bottom up:
//
//	backend      local.Files | objstore.Blocks (the Store's) | ShardsSource (index + shards)
//	disk cache   diskcache.Blocks           (Options.Disk; an object store's data)
//	verify       Verified                   (Options.Verify)
//	frames       FramesSource               (a compressed pack)
//	rows         rowsBlocks                 (windows over a compressed pack)
//
// and over several: Sub, a part of one dataset (a node-aware mount), and source.Mux, the
// sources of a mixture, a dataset with fields or a node's parts under one cache.
package stack

import (
	"log"

	"github.com/blockfs/blockfs/source/objstore"

	"github.com/dustin/go-humanize"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/diskcache"
	"github.com/blockfs/blockfs/source/local"
)

// Options say how a stack reads a dataset's files. The zero value reads them through the
// Store the dataset was opened from (a local directory read buffered, an object store), with
// no disk cache and no checking beyond the backend's own.
type Options struct {
	// Local, when set, reads a local dataset's files as it says instead of through its Store
	// (a mount's memory plan decides); ignored for shards in place, which their backend reads.
	Local *Local
	// Disk puts a disk cache in front of the backend (--disk-cache); nil: none.
	Disk *diskcache.Options
	// Verify checks every file's CRC32C before any of its bytes is served (--verify).
	Verify bool
}

// Local is how a local dataset's files are read: with O_DIRECT (Direct: block data straight
// into the page-aligned cache, cached once), or, with Streams, the files it names with
// O_DIRECT and the others buffered (a resident set the kernel's page cache keeps).
type Local struct {
	Direct  bool
	Streams func(source.FileID) bool
}

// Stack is one dataset's sources below the cache: Blocks, its files as served, and the typed
// handles of the layers that count what they do. Close closes it.
type Stack struct {
	Blocks source.Blocks
	disk   *diskcache.Blocks // nil without a disk cache
	dir    string            // the disk cache's directory
	store  *objstore.Blocks  // the object store's; nil for local data
	frames *FramesSource     // nil without compressed blocks
}

// Build stacks the sources of d as o says. Errors: a disk cache that cannot be opened, and
// Verify of data without checksums (Dataset.Verifiable says why).
func Build(d *layout.Dataset, o Options) (*Stack, error) {
	s := &Stack{}
	stored := d.Stored() // the files as stored: the pack's, for windows over a compressed one
	src := s.backend(d, stored, o.Local)
	if o.Disk != nil {
		dc, err := diskcache.Open(src, stored, *o.Disk)
		if err != nil {
			return nil, err
		}
		src, s.disk, s.dir = dc, dc, o.Disk.Dir
		st := dc.Stats()
		log.Printf("blockfs: disk cache %s: %s in %d files, bound %s; keeps %d of the dataset's files (a fixed set)",
			o.Disk.Dir, ibytes(st.Used), st.Files, ibytes(dc.Limit()), dc.KeptFiles())
	}
	if o.Verify {
		v, err := NewVerified(stored, src)
		if err != nil {
			s.Close()
			return nil, err
		}
		src = v
	}
	s.Blocks = s.served(d, src)
	return s, nil
}

// Open returns a source of d's files as served, read through the Store it was opened from
// (its shards' backend for shards in place; a file in place read buffered): what reading a
// dataset once, without a mount, needs.
func Open(d *layout.Dataset) source.Blocks {
	s, _ := Build(d, Options{}) // fails only for a disk cache or Verify
	return s.Blocks
}

// backend returns the source of stored's files where they are (d's, for shards in place).
func (s *Stack) backend(d, stored *layout.Dataset, loc *Local) source.Blocks {
	if sf, ok := d.ShardsField(); ok {
		be := sf.Backend()
		shards := be.Shards(d)
		s.store, _ = shards.(*objstore.Blocks)
		return newShardsSource(d, sf, be.Index(d), shards, be.Aligned)
	}
	st := stored.Store()
	if s3st, ok := st.(*objstore.Store); ok {
		s.store = s3st.BlocksOf(stored) // checked by ETag and CRC32C; the one opening read through
		return s.store
	}
	switch {
	case loc != nil && loc.Streams != nil:
		return local.NewStreaming(stored, loc.Streams)
	case loc != nil:
		return local.New(stored, loc.Direct)
	case st != nil:
		return st.Blocks(stored)
	}
	return local.New(stored, false) // a file in place
}

// served returns src, a source of d.Stored()'s files as stored, as a source of d's files as
// served: compressed files decompressed (FramesSource), a frame at a time, each checked
// first; and for windows over a compressed pack, the windows' rows. src itself where nothing
// is compressed.
func (s *Stack) served(d *layout.Dataset, src source.Blocks) source.Blocks {
	stored := d.Stored()
	if !stored.Compressed() {
		return src
	}
	s.frames = NewFramesSource(src, stored.FramedFile, stored.Manifest.Compression.Frame)
	s.frames.name = stored.Path
	if stored == d {
		return s.frames
	}
	return &rowsBlocks{w: d, rows: stored, src: s.frames}
}

// Stats are a stack's counters now: nil for a layer it does not have.
type Stats struct {
	Disk   *diskcache.Stats
	Store  *objstore.Counters
	Frames *FramesStats
}

// Stats returns the stack's counters now.
func (s *Stack) Stats() Stats {
	var st Stats
	if s.disk != nil {
		v := s.disk.Stats()
		st.Disk = &v
	}
	if s.store != nil {
		v := s.store.Counters()
		st.Store = &v
	}
	if s.frames != nil {
		v := s.frames.Stats()
		st.Frames = &v
	}
	return st
}

// Close closes the disk cache, logging its counters.
func (s *Stack) Close() {
	if s.disk == nil {
		return
	}
	st := s.disk.Stats()
	log.Printf("blockfs: disk cache %s: %d reads from disk, %d files fetched, %d evicted, %d bad (fetched again), %d not kept; %s in %d files",
		s.dir, st.Hits, st.Fetches, st.Evicted, st.Bad, st.WriteErr, ibytes(st.Used), st.Files)
	s.disk.Close()
}

// Parts returns the Mux of a node's parts of whole (each a layout.Dataset.Sub of it), read
// from s, whole's stack: part i in namespace i, and whole itself (its names file) last.
func (s *Stack) Parts(parts []*layout.Dataset) *source.Mux {
	m := make([]source.Blocks, len(parts)+1)
	for i, sub := range parts {
		m[i] = Sub(s.Blocks, sub)
	}
	m[len(parts)] = s.Blocks
	return source.NewMux(m)
}

// Join returns the Mux of several stacks under one cache (a mixture's sources, a dataset's
// fields): stack i in namespace i.
func Join(stacks []*Stack) *source.Mux {
	m := make([]source.Blocks, len(stacks))
	for i, s := range stacks {
		m[i] = s.Blocks
	}
	return source.NewMux(m)
}

func ibytes(n int64) string { return humanize.IBytes(uint64(n)) }
