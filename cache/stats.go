package cache

import (
	"container/list"
	"sync/atomic"
)

// counters are the cache's live statistics, updated without the lock.
type counters struct {
	served, hits, misses, merged         atomic.Uint64
	readaheadHits, readaheadWasted       atomic.Uint64
	readaheadLate                        atomic.Uint64
	diskReads, diskBytes, diskErrors     atomic.Uint64
	evictions, overflow, prefetchDropped atomic.Uint64
	short                                atomic.Int64 // SetShort's
}

// Stats is a snapshot of the cache's counters.
type Stats struct {
	BytesServed     uint64 `json:"bytes_served"`     // bytes handed to readers (Fill, and pinned pages served)
	Hits            uint64 `json:"cache_hits"`       // pages found loaded
	Misses          uint64 `json:"cache_misses"`     // pages a reader had to load
	Merged          uint64 `json:"merged_misses"`    // pages a reader found loading and waited for
	ReadaheadHits   uint64 `json:"readahead_hits"`   // prefetched pages later read
	ReadaheadWasted uint64 `json:"readahead_wasted"` // prefetched pages evicted unread
	ReadaheadLate   uint64 `json:"readahead_late"`   // readahead requests dropped: their reader had read past them
	PrefetchDropped uint64 `json:"prefetch_dropped"` // readahead requests dropped: full queue, or every slot pinned
	DiskReads       uint64 `json:"disk_reads"`       // reads issued to the source
	DiskBytes       uint64 `json:"disk_bytes"`       // bytes read from the source
	DiskErrors      uint64 `json:"disk_errors"`      // failed source reads
	Evictions       uint64 `json:"evictions"`        // pages dropped to make room
	Overflow        uint64 `json:"uncached_pages"`   // pages served without a slot (all pinned)
	CachedBytes     int64  `json:"cache_bytes"`      // bytes of loaded pages now held
	CapacityBytes   int64  `json:"cache_capacity"`   // the budget, in whole pages
	PageSize        int    `json:"cache_page_size"`  // bytes per page
	// Short is how much more cache the mount's readers at once want than its budget lets it
	// grow to (SetShort); 0 when it holds them.
	Short int64 `json:"cache_short"`
}

// SetShort records how many bytes of cache the readers at once want beyond what the cache
// may grow to (0: none), for Stats; the mount's grower sets it.
func (c *core) SetShort(n int64) { c.stats.short.Store(max(0, n)) }

// Stats returns a snapshot of the counters.
func (c *core) Stats() Stats {
	c.mu.Lock()
	var held int64
	for _, l := range []*list.List{c.lru, c.ahead} {
		if l == nil {
			continue
		}
		for el := l.Front(); el != nil; el = el.Next() {
			held += int64(len(el.Value.(*entry).buf))
		}
	}
	c.mu.Unlock()
	s := &c.stats
	return Stats{
		BytesServed: s.served.Load(), Hits: s.hits.Load(), Misses: s.misses.Load(), Merged: s.merged.Load(),
		ReadaheadHits: s.readaheadHits.Load(), ReadaheadWasted: s.readaheadWasted.Load(),
		ReadaheadLate:   s.readaheadLate.Load(),
		PrefetchDropped: s.prefetchDropped.Load(), DiskReads: s.diskReads.Load(), DiskBytes: s.diskBytes.Load(),
		DiskErrors: s.diskErrors.Load(), Evictions: s.evictions.Load(), Overflow: s.overflow.Load(),
		CachedBytes: held, CapacityBytes: c.Capacity(), PageSize: c.opt.PageSize, Short: s.short.Load(),
	}
}
