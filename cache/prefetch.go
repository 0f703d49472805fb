package cache

import "slices"

// Readahead: Prefetch queues requests without blocking; Options.Workers goroutines load them,
// never evicting a page read ahead (see evictLocked), and drop a request whose reader has
// read past it (PrefetchUnless).

// request is a readahead request: n bytes of file id from off.
type request struct {
	id     FileID
	off, n int64
	passed func() bool // nil, or reports that the reader it was made for has read past it
}

// Prefetch asks a readahead worker to load n bytes of file id from off. It never blocks: when
// the queue is full the request is dropped and Prefetch returns false.
func (c *Cache) Prefetch(id FileID, off, n int64) bool {
	return c.PrefetchUnless(id, off, n, nil)
}

// PrefetchUnless is Prefetch for a request that can come too late: the worker drops it (and
// counts it in Stats.ReadaheadLate) when passed, if not nil, reports true as the worker takes
// it up or moves on to its next run of pages. A worker behind its reader (the store slower
// than the reads of blocks already cached) would otherwise load blocks the reader has read and
// the cache has dropped since, fetching them twice, and hold blocks just read among the pages
// read ahead, where they crowd out those that are.
func (c *Cache) PrefetchUnless(id FileID, off, n int64, passed func() bool) bool {
	id |= c.ns
	select {
	case c.queue <- request{id, off, n, passed}:
		return true
	default:
		c.stats.prefetchDropped.Add(1)
		return false
	}
}

func (c *core) worker() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case r := <-c.queue:
			c.prefetch(r)
		}
	}
}

// prefetch loads the pages of r that are not cached, one run of up to MaxRead at a time, so a
// reader that overtakes the worker loads what it needs itself instead of queueing behind it.
func (c *core) prefetch(r request) {
	size := c.src.Size(r.id)
	end := min(r.off+r.n, size)
	if r.off < 0 || r.off >= end {
		return
	}
	ps := int64(c.opt.PageSize)
	step := int64(c.opt.MaxRead / c.opt.PageSize)
	first, last := r.off/ps, (end-1)/ps
	var ents, had []*entry
	for pg := first; pg <= last && c.ctx.Err() == nil; pg += step {
		if r.passed != nil && r.passed() {
			c.stats.readaheadLate.Add(1)
			return
		}
		hi := min(pg+step-1, last)
		// The worker waits for the loads it starts, one run at a time; not for pages already
		// cached or loading (a reader's load, or another request's for the same block: a
		// reader may ask for a block again), which would hold it from starting the next.
		had = c.present(r.id, pg, hi, had[:0])
		// Strict: with every slot pinned by readers, a prefetched page would have nowhere to
		// stay, so readahead stops instead of reading into a buffer it would drop.
		var full bool
		ents, full = c.pin(r.id, pg, hi, size, forReadahead, stopWhenFull, ents[:0])
		failed := false
		for _, e := range ents {
			if slices.Contains(had, e) {
				continue
			}
			<-e.load.Done()
			failed = failed || e.load.Err() != nil
		}
		c.unpin(ents)
		if full {
			c.stats.prefetchDropped.Add(1)
			return
		}
		if failed {
			return // the source failed: the rest would too, and a reader will say so
		}
	}
}
