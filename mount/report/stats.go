package report

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/blockfs/blockfs/source/objstore"

	"github.com/blockfs/blockfs/cache"
	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/diskcache"
	"github.com/blockfs/blockfs/source/stack"
	"github.com/blockfs/blockfs/view"
)

// StatsName is the mount's stats.json, under its mount point in MetaDir: Stats, made at each
// open. view declares it; the command line takes it from here.
const StatsName = view.StatsName

// Stats is .blockfs/stats.json: a mount's counters, by layer, from the FUSE reads down to the
// object store. The daemon makes it at each open of the file (and for --metrics at each
// scrape); `blockfs stats` and the Python package read it. Its JSON is one flat object: the
// FUSE layer's keys (bfs.Counters), the cache's (cache.Stats, but for its bytes_served, which
// is the FUSE layer's), then "disk_cache", "store", "decompress" and "sources". Counters count from the
// mount on; a new daemon (daemon_pid) starts them over.
//
// "disk_cache", "store" and "decompress" have two shapes. For one dataset (and a node-aware
// mount) each is an object, DiskCache's, Store's or Decompress's, and absent without a disk
// cache, for local data, or without compressed blocks. For a
// mixture or a dataset with fields (Sources set) each is a list by source index, each
// SourceStats' DiskCache or Store (null for a source without), absent when no source has one.
type Stats struct {
	bfs.Counters // the FUSE layer's: bytes served by file, reads, waits, the daemon, "readers"
	// Cache is the page cache's counters (cache_hits, disk_reads, cache_bytes, ...). Its
	// BytesServed is not in stats.json (the key is the FUSE layer's): it reads 0 decoded.
	Cache cache.Stats
	// DiskCache is one dataset's --disk-cache counters ("disk_cache"); nil without a disk
	// cache, and with Sources (each source has its own).
	DiskCache *diskcache.Stats
	// Store is one dataset's object store request counters ("store"); nil for local data, and
	// with Sources (each source has its own).
	Store *objstore.Counters
	// Decompress is one dataset's decompression counters ("decompress"); nil when none of its
	// blocks is compressed, and with Sources.
	Decompress *stack.FramesStats
	// Sources are a mixture's sources or a dataset's fields, by index ("sources"); nil for
	// one dataset and for a node-aware mount.
	Sources []SourceStats
}

// SourceStats is one source of a mixture, or one field of a dataset with fields: its entry in
// stats.json's "sources", and its entries in "disk_cache" and "store".
type SourceStats struct {
	Index     int    `json:"index"`      // its index: in the mixture file's sources, or the fields' order
	Name      string `json:"name"`       // its name (a mixture's source name, a field's name)
	Reads     uint64 `json:"reads"`      // reads it gave the cache (from disk, the disk cache or the store)
	BytesRead uint64 `json:"bytes_read"` // bytes it gave the cache
	// DiskCache is its --disk-cache counters (stats.json's "disk_cache"[Index]); nil without.
	DiskCache *diskcache.Stats `json:"-"`
	// Store is its object store's counters ("store"[Index]); nil for local data.
	Store *objstore.Counters `json:"-"`
	// Decompress is its decompression counters ("decompress"[Index]); nil without compressed
	// blocks.
	Decompress *stack.FramesStats `json:"-"`
}

// ReaderStats is one open file's line in stats.json's "readers" (the FUSE layer's).
type ReaderStats = bfs.ReaderStats

// ErrorStats is one failure in stats.json's "last_errors" (the FUSE layer's).
type ErrorStats = bfs.ErrorStats

// Stores returns the object stores' counters by source index: one dataset's at 0, or each
// source's; nil entries for local data.
func (s *Stats) Stores() []*objstore.Counters {
	return bySource(s, s.Store, func(src *SourceStats) **objstore.Counters { return &src.Store })
}

// DiskCaches returns the disk caches' counters by source index: one dataset's at 0, or each
// source's; nil entries for sources without one.
func (s *Stats) DiskCaches() []*diskcache.Stats {
	return bySource(s, s.DiskCache, func(src *SourceStats) **diskcache.Stats { return &src.DiskCache })
}

// Decompressions returns the decompression counters by source index: one dataset's at 0, or
// each source's; nil entries for sources without compressed blocks.
func (s *Stats) Decompressions() []*stack.FramesStats {
	return bySource(s, s.Decompress, func(src *SourceStats) **stack.FramesStats { return &src.Decompress })
}

// counted is what a source may have counters of beside its reads: a store, a disk cache,
// decompression.
type counted interface {
	objstore.Counters | diskcache.Stats | stack.FramesStats
}

// bySource returns one's or the sources' values, by source index.
func bySource[T counted](s *Stats, one *T, at func(*SourceStats) **T) []*T {
	if s.Sources == nil {
		return []*T{one}
	}
	out := make([]*T, len(s.Sources))
	for i := range s.Sources {
		out[i] = *at(&s.Sources[i])
	}
	return out
}

// statsJSON is Stats as stats.json lays it out, in its order. The cache's fields are one
// level deeper than the FUSE layer's, so that where both have a key (bytes_served)
// encoding/json takes the FUSE layer's, as stats.json always has; SourceServed, last as it
// always was, shadows the FUSE layer's the same way.
type statsJSON struct {
	bfs.Counters
	cacheJSON
	DiskCache    json.RawMessage `json:"disk_cache,omitempty"`
	Store        json.RawMessage `json:"store,omitempty"`
	Decompress   json.RawMessage `json:"decompress,omitempty"`
	Sources      []SourceStats   `json:"sources,omitempty"`
	SourceServed uint64          `json:"source_bytes_served,omitempty"`
}

type cacheJSON struct{ cache.Stats }

// MarshalJSON writes stats.json's object.
func (s Stats) MarshalJSON() ([]byte, error) {
	w := statsJSON{Counters: s.Counters, cacheJSON: cacheJSON{s.Cache}, Sources: s.Sources, SourceServed: s.SourceServed}
	var err error
	if w.DiskCache, err = oneOrList(s.DiskCaches(), s.Sources != nil); err != nil {
		return nil, err
	}
	if w.Store, err = oneOrList(s.Stores(), s.Sources != nil); err != nil {
		return nil, err
	}
	if w.Decompress, err = oneOrList(s.Decompressions(), s.Sources != nil); err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads stats.json's object.
func (s *Stats) UnmarshalJSON(b []byte) error {
	var w statsJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Stats{Counters: w.Counters, Cache: w.Stats, Sources: w.Sources}
	s.SourceServed = w.SourceServed
	if err := fromOneOrList(w.DiskCache, &s.DiskCache, s.Sources, func(src *SourceStats) **diskcache.Stats { return &src.DiskCache }); err != nil {
		return fmt.Errorf("disk_cache: %w", err)
	}
	if err := fromOneOrList(w.Store, &s.Store, s.Sources, func(src *SourceStats) **objstore.Counters { return &src.Store }); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if err := fromOneOrList(w.Decompress, &s.Decompress, s.Sources, func(src *SourceStats) **stack.FramesStats { return &src.Decompress }); err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	return nil
}

// oneOrList encodes values by source: nothing when none is set, the list (null for a source
// without) when list is set, else the one value.
func oneOrList[T counted](per []*T, list bool) (json.RawMessage, error) {
	set := false
	for _, p := range per {
		set = set || p != nil
	}
	switch {
	case !set:
		return nil, nil
	case list:
		return json.Marshal(per)
	default:
		return json.Marshal(per[0])
	}
}

// fromOneOrList decodes what oneOrList wrote: an object into one, or a list into each of
// srcs (at gives where), which must be as long.
func fromOneOrList[T counted](raw json.RawMessage, one **T, srcs []SourceStats, at func(*SourceStats) **T) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] != '[' {
		return json.Unmarshal(raw, one)
	}
	var list []*T
	if err := json.Unmarshal(raw, &list); err != nil {
		return err
	}
	if len(list) != len(srcs) {
		return fmt.Errorf("a list of %d for %d sources", len(list), len(srcs))
	}
	for i, p := range list {
		*at(&srcs[i]) = p
	}
	return nil
}

// Mount makes a mount's Stats from the FUSE layer's counters and the layers under them.
// Immutable after NewMount; safe for concurrent use.
type Mount struct {
	cache  *cache.Cache
	stacks []*stack.Stack // one dataset's stack, or each source's
	mux    *source.Mux    // the sources under the cache; nil for one dataset
	names  []string       // the sources' or fields' names; nil for one dataset
}

// NewMount returns the stats of a mount of one dataset's stack (mux nil; a node-aware mount's
// parts are one dataset's), or of a mixture's or a dataset with fields' sources under mux,
// named by names.
func NewMount(c *cache.Cache, stacks []*stack.Stack, mux *source.Mux, names []string) *Mount {
	return &Mount{cache: c, stacks: stacks, mux: mux, names: names}
}

// Snapshot returns the mount's Stats now, given the FUSE layer's counters.
func (ms *Mount) Snapshot(c bfs.Counters) Stats {
	s := Stats{Counters: c, Cache: ms.cache.Stats()}
	if ms.mux == nil {
		st := ms.stacks[0].Stats()
		s.DiskCache, s.Store, s.Decompress = st.Disk, st.Store, st.Frames
		return s
	}
	s.Sources = make([]SourceStats, len(ms.names))
	for i, name := range ms.names {
		reads, n := ms.mux.Read(i)
		s.Sources[i] = SourceStats{Index: i, Name: name, Reads: reads, BytesRead: n}
		if i < len(ms.stacks) {
			st := ms.stacks[i].Stats()
			s.Sources[i].DiskCache, s.Sources[i].Store, s.Sources[i].Decompress = st.Disk, st.Store, st.Frames
		}
	}
	return s
}

// JSON returns stats.json's bytes now: fs.Options.Stats.
func (ms *Mount) JSON(c bfs.Counters) ([]byte, error) {
	b, err := json.MarshalIndent(ms.Snapshot(c), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
