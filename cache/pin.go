package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/blockfs/blockfs/source"
)

// Pins holds pages that Pin loaded and pinned, so that their bytes can be handed out without a
// copy (a FUSE reply written straight from the cache) until Release. A Pins is used by one
// goroutine at a time; its zero value is ready to use, and it can be reused after Release.
type Pins struct {
	c     *Cache
	ents  []*entry
	dense []*entry // backing of the runs' ents, reused after Release
}

// Run is a set of pinned pages of one file: ents[i] is page first+i, or nil where a page was
// not asked for.
type Run struct {
	first int64 // page index of ents[0]
	ps    int64
	ents  []*entry
}

// Pin loads (or finds) the pages of file id covering [off, off+n), pins them into ps and
// returns them as a Run. The pages stay in memory, unchanged, until ps.Release; an error (a
// failed load, a range outside the file, ctx ending while pages load) leaves whatever was
// pinned before in ps. Requires n > 0. Counted as hits and misses like Fill, once per page.
// The time waited for pages goes to w (nil: not counted).
func (c *Cache) Pin(ctx context.Context, w *Waits, ps *Pins, id FileID, off, n int64) (Run, error) {
	id |= c.ns
	size := c.src.Size(id)
	if n <= 0 || off < 0 || off+n > size {
		return Run{}, fmt.Errorf("file %d: [%d, %d) of %d bytes: %w", id, off, off+n, size, ErrRange)
	}
	pgs := int64(c.opt.PageSize)
	return c.PinPages(ctx, w, ps, id, off/pgs, (off+n-1)/pgs+1, nil)
}

// PinPages is Pin for the pages first <= p < end of file id that are set in the bitset want
// (bit p%64 of want[p/64] for page p; nil wants them all). Consecutive pages that are missing
// are loaded with one read.
func (c *Cache) PinPages(ctx context.Context, w *Waits, ps *Pins, id FileID, first, end int64, want []uint64) (Run, error) {
	return c.retryJoined(ctx, ps, func() (Run, error) { return c.pinPages(ctx, w, ps, id, first, end, want) })
}

// retryJoined runs pin (a reader's PinPages or PinPage into ps) and, when it fails on a load
// that began before the reader asked, unpins what it pinned and runs it once more. Such a
// reader only joined a load someone else started (readahead, another reader), which may have
// failed on a source that has recovered since: its reads then get the bytes, not that load's
// error. A load it began itself that fails is its answer at once, so a source that stays
// down still gives EIO, within twice a load's bound. A failed pin leaves ps.dense as it found
// it (pinPages); its pins are in ps.ents from start.
func (c *Cache) retryJoined(ctx context.Context, ps *Pins, pin func() (Run, error)) (Run, error) {
	mark, start := c.made.Load(), len(ps.ents)
	r, err := pin()
	if !joinedFailed(ctx, err, ps.ents[start:], mark) {
		return r, err
	}
	c.unpin(ps.ents[start:])
	clear(ps.ents[start:])
	ps.ents = ps.ents[:start]
	return pin()
}

// joinedFailed reports whether a read that pinned ents and got err should try once more: it
// failed, not because its context ended, on a load among ents (all done then) that began
// before mark.
func joinedFailed(ctx context.Context, err error, ents []*entry, mark uint64) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	for _, e := range ents {
		if e.made <= mark && e.load.Err() != nil {
			return true
		}
	}
	return false
}

func (c *Cache) pinPages(ctx context.Context, w *Waits, ps *Pins, id FileID, first, end int64, want []uint64) (Run, error) {
	id |= c.ns
	if ps.c == nil {
		ps.c = c
	}
	size := c.src.Size(id)
	pgs := int64(c.opt.PageSize)
	if first < 0 || end <= first || (end-1)*pgs >= size {
		return Run{}, fmt.Errorf("file %d: pages [%d, %d) of a %d-byte file: %w", id, first, end, size, ErrRange)
	}
	if cap(ps.dense)-len(ps.dense) < int(end-first) {
		ps.dense = make([]*entry, 0, max(2*cap(ps.dense), int(end-first), 64))
	}
	at := len(ps.dense)
	ps.dense = ps.dense[:at+int(end-first)]
	r := Run{first: first, ps: pgs, ents: ps.dense[at:]}
	// Every page wanted, in one pass under the cache's lock (a request of small records wants
	// pages here and there: a pass for each run of them took the lock a dozen times a request,
	// and many readers queued on it).
	start := len(ps.ents)
	var full bool
	ps.ents, full = c.pinWanted(id, first, end-1, want, size, forReader, stopWhenFull, ps.ents)
	got := ps.ents[start:]
	for p := first; p < end && len(got) > 0; p++ {
		if wants(want, p) {
			r.ents[p-first], got = got[0], got[1:]
		}
	}
	err := waitAll(ctx, w, ps.ents[start:])
	if err == nil && full {
		err = ErrFull
	}
	if err != nil {
		// No run is returned: give back its part of dense (ps.ents keeps the pins for
		// Release or retryJoined). at is this call's: dense may have a new array.
		clear(ps.dense[at:])
		ps.dense = ps.dense[:at]
		return Run{}, err
	}
	return r, nil
}

// wants reports whether page p is in the set want (bit p%64 of want[p/64]; nil: every page).
func wants(want []uint64, p int64) bool { return want == nil || want[p/64]&(1<<(p%64)) != 0 }

// PinPage pins page p of file id like PinPages, except that when every slot is pinned the page
// is read into a buffer of its own (served once, not cached) instead of failing.
func (c *Cache) PinPage(ctx context.Context, w *Waits, ps *Pins, id FileID, p int64) (Run, error) {
	return c.retryJoined(ctx, ps, func() (Run, error) { return c.pinPage(ctx, w, ps, id, p) })
}

func (c *Cache) pinPage(ctx context.Context, w *Waits, ps *Pins, id FileID, p int64) (Run, error) {
	id |= c.ns
	if ps.c == nil {
		ps.c = c
	}
	size := c.src.Size(id)
	pgs := int64(c.opt.PageSize)
	if p < 0 || p*pgs >= size {
		return Run{}, fmt.Errorf("file %d: page %d of a %d-byte file: %w", id, p, size, ErrRange)
	}
	at := len(ps.ents)
	ps.ents, _ = c.pin(id, p, p, size, forReader, privateWhenFull, ps.ents)
	if err := waitAll(ctx, w, ps.ents[at:at+1]); err != nil {
		return Run{}, err
	}
	return Run{first: p, ps: pgs, ents: ps.ents[at : at+1 : at+1]}, nil
}

// ErrFull is PinPages's answer when every slot of the cache is pinned: the caller should
// release its pins and read one page at a time (PinPage).
var ErrFull = errors.New("every cache page is pinned")

// Append appends to vecs the bytes [off, off+n) of the run's file (inside the run), as one
// slice per page they touch, and returns the extended slice. The slices alias the cache: they
// are valid until the Pins that made the run is released.
func (r Run) Append(vecs [][]byte, off, n int64) [][]byte {
	rel := off - r.first*r.ps
	for n > 0 {
		i, in := rel/r.ps, rel%r.ps
		take := min(n, r.ps-in)
		vecs = append(vecs, r.ents[i].buf[in:in+take])
		rel += take
		n -= take
	}
	return vecs
}

// Page returns the bytes of page p of the run's file, or nil if the run does not hold it (not
// asked for, or outside the run). Valid until the Pins that made the run is released.
func (r Run) Page(p int64) []byte {
	if i := p - r.first; i >= 0 && i < int64(len(r.ents)) && r.ents[i] != nil {
		return r.ents[i].buf
	}
	return nil
}

// Bytes returns the bytes [off, off+n) of the run's file if they lie in one page, and
// otherwise copies them into scratch (which must hold n bytes) and returns that.
func (r Run) Bytes(off, n int64, scratch []byte) []byte {
	rel := off - r.first*r.ps
	if in := rel % r.ps; in+n <= r.ps {
		return r.ents[rel/r.ps].buf[in : in+n]
	}
	done := 0
	for _, v := range r.Append(nil, off, n) {
		done += copy(scratch[done:], v)
	}
	return scratch[:n]
}

// Release unpins every page pinned into ps. Slices handed out from its runs must no longer be
// used.
func (ps *Pins) Release() {
	if len(ps.ents) > 0 {
		ps.c.unpin(ps.ents)
	}
	clear(ps.ents)
	clear(ps.dense)
	ps.ents, ps.dense = ps.ents[:0], ps.dense[:0]
	ps.c = nil // a reused Pins (view pools them) may pin pages of another cache
}

// CountServed counts n bytes handed to readers from pinned pages (the bytes_served statistic).
func (c *core) CountServed(n int) { c.stats.served.Add(uint64(n)) }

// pinFor says whose pin it is: a reader's, or readahead's (which marks the pages it creates).
type pinFor bool

const (
	forReader    pinFor = false
	forReadahead pinFor = true
)

// whenFull says what pin does when no slot is free: give a page a private buffer, or stop.
type whenFull bool

const (
	privateWhenFull whenFull = false
	stopWhenFull    whenFull = true
)

// pin takes a reference on pages first..last of file id, creating and loading the missing
// ones (in runs of up to MaxRead bytes, one disk read per run). The returned entries may still
// be loading; wait on load.Done. With stopWhenFull, pin never gives a page a private buffer:
// when no slot is free it stops and reports full, having pinned (and appended) only the pages
// before.
func (c *core) pin(id FileID, first, last, size int64, who pinFor, onFull whenFull, ents []*entry) ([]*entry, bool) {
	return c.pinWanted(id, first, last, nil, size, who, onFull, ents)
}

// pinWanted is pin for the pages first..last in the set want (wants; nil: all of them): a
// page not wanted ends a run of missing pages as a cached one does. The entries appended are
// the wanted pages', in order.
func (c *core) pinWanted(id FileID, first, last int64, want []uint64, size int64, who pinFor, onFull whenFull, ents []*entry) ([]*entry, bool) {
	prefetch, strict := who == forReadahead, onFull == stopWhenFull
	if c.opt.Whole {
		out, ok, full := c.pinWhole(id, first, last, want, size, prefetch, ents)
		if ok || full {
			return out, full
		}
	}
	var runs [][]*entry
	var run []*entry
	full := false
	perRun := c.opt.MaxRead / c.opt.PageSize
	c.mu.Lock()
	for pg := first; pg <= last; pg++ {
		if !wants(want, pg) {
			if len(run) > 0 {
				runs, run = append(runs, run), nil
			}
			continue
		}
		k := key{id, pg}
		e := c.pages[k]
		if e != nil {
			if e.refs == 0 && e.slot >= 0 {
				c.pinned++
			}
			e.refs++
			c.touchLocked(e, prefetch)
			ents = append(ents, e)
			if len(run) > 0 {
				runs, run = append(runs, run), nil
			}
			continue
		}
		if strict && !c.slotFreeLocked(prefetch) {
			full = true
			break
		}
		if !prefetch {
			c.stats.misses.Add(1)
		}
		e = c.newEntryLocked(k, size, prefetch)
		e.refs++ // the caller's
		e.prefetched = prefetch
		ents = append(ents, e)
		if len(run) == perRun {
			runs, run = append(runs, run), nil
		}
		run = append(run, e)
	}
	if len(run) > 0 {
		runs = append(runs, run)
	}
	hows := make([]source.Read, len(runs))
	for i, r := range runs {
		hows[i] = c.loadReadLocked(r, prefetch)
	}
	c.crowdLocked()
	c.mu.Unlock()
	for i, r := range runs {
		c.startLoad(hows[i], r)
	}
	return ents, full
}
