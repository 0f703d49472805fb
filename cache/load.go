package cache

import (
	"errors"

	"github.com/blockfs/blockfs/source"
)

// Loads: a run of missing pages is read from the source with one Fill, on a goroutine of its
// own, and published to the readers waiting for it.

// pinWhole is pin for Options.Whole: when no page of file id is cached or loading and the
// slots no one pins hold the whole file, it creates every page of the file, pins those of
// first..last in want (pinWanted) for the caller and loads them all with one Fill, and
// reports ok; otherwise it pins nothing, and reports full when it is readahead (prefetch)
// that found no room for the whole file (evictLocked keeps pages read ahead from it):
// readahead then stops rather than load part of a file whose rest would come page by page.
// The pages not asked for count as read ahead.
func (c *core) pinWhole(id FileID, first, last int64, want []uint64, size int64, prefetch bool, ents []*entry) (out []*entry, ok, full bool) {
	ps := int64(c.opt.PageSize)
	n := (size + ps - 1) / ps
	if n <= 1 {
		return ents, false, false // one page: pin loads it whole anyway
	}
	c.mu.Lock()
	if n > int64(c.slots-c.pinned) {
		c.mu.Unlock()
		return ents, false, prefetch && n <= int64(c.slots) // a file larger than the cache: by pages
	}
	// The pages asked for first: a read of cached pages stops at its first.
	for _, r := range [][2]int64{{first, last}, {0, n - 1}} {
		for pg := r[0]; pg <= r[1]; pg++ {
			if c.pages[key{id, pg}] != nil {
				c.mu.Unlock()
				return ents, false, false
			}
		}
	}
	for int64(len(c.free)) < n && c.evictLocked(prefetch) {
	}
	if int64(len(c.free)) < n {
		c.mu.Unlock()
		return ents, false, prefetch // only readahead may fail here (evictLocked)
	}
	run := make([]*entry, n)
	for pg := range n {
		e := c.newEntryLocked(key{id, pg}, size, prefetch) // takes one of the n free slots
		asked := pg >= first && pg <= last && wants(want, pg)
		if asked {
			e.refs++ // the caller's
			ents = append(ents, e)
			if !prefetch {
				c.stats.misses.Add(1)
			}
		}
		e.prefetched = prefetch || !asked
		run[pg] = e
	}
	how := c.loadReadLocked(run, prefetch)
	c.crowdLocked()
	c.mu.Unlock()
	c.startLoad(how, run)
	return ents, true, false
}

// loadReadLocked returns how the source is to serve run's load: as a reader's, or for
// readahead (prefetch) marked Ahead, the mark set on run's pages so that a reader who comes to
// wait for one promotes it. Caller holds c.mu, and has not published run's pages yet.
func (c *core) loadReadLocked(run []*entry, prefetch bool) source.Read {
	if !prefetch {
		return source.Read{}
	}
	a := new(source.Ahead)
	for _, e := range run {
		e.ahead = a
	}
	return source.Read{Ahead: a}
}

// startLoad loads run as how says on a goroutine of its own (load), under the cache's
// context: other readers may wait for the same pages, so no reader's context ends it.
func (c *core) startLoad(how source.Read, run []*entry) {
	c.loads.Add(1)
	go func() {
		defer c.loads.Done()
		c.load(how, run)
	}()
}

// load reads a run of consecutive pages of one file with one Fill of the source, publishes
// them and drops the load's references.
func (c *core) load(how source.Read, run []*entry) {
	bufs := make([][]byte, len(run))
	var n int64
	for i, e := range run {
		bufs[i] = e.buf
		n += int64(len(e.buf))
	}
	k := run[0].key
	fill := func() error {
		err := c.src.Fill(c.ctx, k.id, k.page*int64(c.opt.PageSize), bufs, how)
		c.stats.diskReads.Add(1)
		if err == nil {
			c.stats.diskBytes.Add(uint64(n))
		} else {
			c.stats.diskErrors.Add(1)
		}
		return err
	}
	err := fill()
	c.mu.Lock()
	if errors.Is(err, source.ErrNotTried) && !how.Background() {
		// The source gave the load up without asking the store (readahead's, on a store it
		// still counted silent), but a reader has come to wait for it since (Promote, under
		// c.mu): its answer must be the store's, so the load asks once, as a reader's. A
		// reader that comes after the error is published finds the pages gone and loads them
		// itself. (Without this, a read right after the store came back could take the
		// error of a readahead begun after it asked: one EIO among the bytes.)
		c.mu.Unlock()
		err = fill()
		c.mu.Lock()
	}
	for _, e := range run {
		e.load.Set(struct{}{}, err)
		if e.slot < 0 {
			continue
		}
		c.loading--
		if err != nil {
			// Forget the page so a later read tries again, and free its slot now: the readers
			// that hold it only take its error, never its bytes. (Held until they let go, a
			// large file's failed slots kept a read that tried again from loading the file
			// whole, and it loaded the pages one by one, each costing a whole-object check.)
			delete(c.pages, e.key)
			c.pinned--
			c.free = append(c.free, e.slot)
			e.slot = -1
			e.refs-- // the load's
			continue
		}
		e.elem = c.pushLocked(e)
		c.unrefLocked(e)
	}
	c.crowdLocked()
	c.mu.Unlock()
	for _, e := range run {
		e.load.Wake()
	}
}
