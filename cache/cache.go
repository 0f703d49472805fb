// Package cache is blockfs's page cache: a budget of page-sized slots in one anonymous
// mapping (outside the Go heap, so the daemon's RSS is bounded by the budget whatever the GC
// does; Grow puts more of the mapping in service, up to Options.Max), merged concurrent
// misses, disk reads coalesced into large aligned preadv calls, and readahead workers fed by
// a bounded, non-blocking queue.
//
// Eviction: loaded pages are in one of two lists. Pages a reader has read are evicted least
// recently used first; pages read ahead and not read yet go last, to a reader only (the one
// read ahead last first), never to readahead (it stops instead), unless stale (twice the
// cache's pages loaded since, no reader having come). An epoch reads each record once: what a
// reader has read is likely done with, what readahead brought is what it reads next.
//
// Lock order: Cache.mu only; it is never held across I/O or while waiting for a load.
//
// Contexts: a read waits for pages with its caller's context (a FUSE request's, cancelled when
// the reader is interrupted); the disk read itself runs on a goroutine of its own with the
// cache's own context, because other readers may be waiting on the same pages, so a reader
// whose context ends stops waiting at once while the load goes on. A read's time waiting for
// pages goes to the Waits it passes (Fill, Pin), if any. Readahead's loads are marked
// source.Read.Ahead, so that a source with a bounded pool of requests serves readers first,
// promoted as soon as a reader waits for one of their pages. Close cancels the cache's
// context and waits for the loads.
package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/flight"
	"github.com/blockfs/blockfs/source"
)

// FileID names a file of the source.
type FileID = source.FileID

// The cache reads pages from a source.Blocks. Each buf it asks a source to fill starts
// page-aligned and its capacity reaches the end of its slot, so a source may read a short last
// page up to an alignment boundary (direct I/O).

// Options configure a Cache. Zero fields take the stated defaults.
type Options struct {
	Size     int64 // byte budget for cached pages; default 256 MiB; at least MinPages pages
	PageSize int   // bytes per page, a multiple of 4096; default 1 MiB
	MaxRead  int   // largest disk read, a multiple of PageSize; default 4 MiB
	Workers  int   // readahead goroutines; default 4
	Queue    int   // readahead requests that may wait; default 1024
	// Keep is the budget Reserve leaves for cached pages (what the mount's windows and
	// readahead need); default 0: MinPages pages.
	Keep int64
	// Max is the most Grow may take the cache to (bytes, whole pages); default Size: it
	// cannot grow. The cache reserves address space for Max, not memory: the slots beyond Size
	// are mapped PROT_NONE (no commit charge, even under strict overcommit) until Grow puts
	// them in service.
	Max int64
	// Whole makes a load take the whole file a missing page is in, in one Fill of the source,
	// when none of the file's pages is cached or loading and the slots no one pins hold all of
	// it (else the pages asked for are loaded, in runs of MaxRead). For a source that checks
	// each file whole (an object store with a checksum per object), where reading part of a
	// file costs reading all of it. Default false.
	Whole bool
}

// Defaults for Options.
const (
	DefaultSize     = 256 << 20
	DefaultPageSize = 1 << 20
	DefaultMaxRead  = 4 << 20
	DefaultWorkers  = 4
	DefaultQueue    = 1024
	// MinPages is the smallest number of pages a cache may have.
	MinPages = 4
)

func (o *Options) setDefaults() {
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	if o.MaxRead == 0 {
		o.MaxRead = max(DefaultMaxRead, o.PageSize)
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.Queue == 0 {
		o.Queue = DefaultQueue
	}
	o.Max = max(o.Max, o.Size)
}

// Validate checks the options after defaults are applied.
func (o *Options) Validate() error {
	o.setDefaults()
	switch {
	case o.PageSize <= 0 || o.PageSize%4096 != 0:
		return fmt.Errorf("cache page size %d is not a positive multiple of 4096", o.PageSize)
	case o.Size < int64(MinPages)*int64(o.PageSize):
		return fmt.Errorf("cache size %d is below the minimum of %d pages of %d bytes", o.Size, MinPages, o.PageSize)
	case o.MaxRead < o.PageSize || o.MaxRead%o.PageSize != 0:
		return fmt.Errorf("max read %d is not a multiple of the page size %d", o.MaxRead, o.PageSize)
	case o.Workers < 0 || o.Queue < 1:
		return fmt.Errorf("readahead workers %d and queue %d must be >= 0 and >= 1", o.Workers, o.Queue)
	}
	return nil
}

type key struct {
	id   FileID
	page int64
}

// entry is one page. Fields other than those guarded by Cache.mu are written before the load
// is done and only read after it. While it loads, the load holds a reference of its own.
type entry struct {
	key  key
	buf  []byte // the page's bytes, len = valid length
	made uint64 // core.made once it was made: its load began after a mark below it
	// load is the page's load: its error is set under Cache.mu, then the waiters are woken
	// after the lock is released; its result is read once Done.
	load flight.Call[struct{}]

	// Guarded by Cache.mu.
	// slot is the page's arena slot; -1 for a page that did not fit (never in the map) or
	// whose load failed (the slot was freed then).
	slot       int
	refs       int
	elem       *list.Element // in ahead (prefetched or kept) or lru once loaded successfully
	prefetched bool          // loaded by readahead and not yet read
	kept       bool          // read, then asked for by readahead again: in ahead till read
	seq        uint64        // the count of pages loaded when it was (core.seq)
	ahead      *source.Ahead // a readahead's load's standing (Promote: a reader waits for it); nil for a reader's
}

// Cache is the page cache of a mount, safe for concurrent use. A Cache made by Namespace
// shares its pages, budget and workers with the Cache it came from, and adds its namespace to
// every FileID it is given (a mixture's sources share one cache, each with ids of its own).
type Cache struct {
	*core
	ns FileID // added to every FileID (bits NamespaceShift and up)
}

// NamespaceShift is where a namespace's bits start in a FileID: a source.Blocks under a
// namespaced cache (source.Mux) routes on them.
const NamespaceShift = source.NamespaceShift

// Namespace returns a Cache over the same pages whose FileIDs are those of namespace i
// (0 <= i < 2^(64-NamespaceShift)): id becomes id | i<<NamespaceShift. Close only the Cache New
// returned.
func (c *Cache) Namespace(i int) *Cache {
	return &Cache{core: c.core, ns: FileID(i) << NamespaceShift}
}

// core is the cache itself, shared by its namespaces.
type core struct {
	// Immutable after New.
	src   source.Blocks
	opt   Options
	arena []byte

	mu    sync.Mutex
	slots int            // slots in service: the arena's less those Reserve took and spare (guarded by mu)
	spare []int          // slots never in service, for Grow (guarded by mu)
	pages map[key]*entry // loading and loaded pages (guarded by mu)
	lru   *list.List     // loaded pages a reader has read, most recent first (guarded by mu)
	ahead *list.List     // loaded pages read ahead, not read yet, most recent first (guarded by mu)
	seq   uint64         // pages loaded so far (guarded by mu)
	made  atomic.Uint64  // entries made so far (each load's pages are made as it begins)
	free  []int          // unused slots (guarded by mu)
	// pinned counts slots whose page has references (guarded by mu).
	pinned int
	// loading counts slots whose page is being loaded (guarded by mu); they are pinned too,
	// by the load.
	loading int
	crowded atomic.Bool // Crowded's answer, set under mu (crowdLocked)

	queue  chan request
	ctx    context.Context // the loads'; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the readahead workers
	loads  sync.WaitGroup // loads in progress

	stats counters
}

// New creates a cache over src and starts its readahead workers.
func New(src source.Blocks, opt Options) (*Cache, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	slots := int(opt.Size / int64(opt.PageSize))
	most := int(opt.Max / int64(opt.PageSize))
	arena, err := reserveArena(slots, most, opt.PageSize)
	if err != nil && most > slots {
		// An address space limit (ulimit -v): without room to grow, the cache still works.
		most = slots
		arena, err = reserveArena(slots, most, opt.PageSize)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reserve %d bytes for the cache: %w", most*opt.PageSize, err)
	}
	// Transparent huge pages where the kernel allows them (advisory; an error changes
	// nothing): readers of small records copy from random places of whole blocks, and with 4
	// KiB pages every record is a TLB miss.
	_ = unix.Madvise(arena, unix.MADV_HUGEPAGE)
	ctx, cancel := context.WithCancel(context.Background())
	c := &core{src: src, opt: opt, arena: arena, slots: slots,
		pages: make(map[key]*entry), lru: list.New(), ahead: list.New(), free: make([]int, slots),
		queue: make(chan request, opt.Queue), ctx: ctx, cancel: cancel}
	for i := range c.free {
		c.free[i] = slots - 1 - i
	}
	for i := most - 1; i >= slots; i-- {
		c.spare = append(c.spare, i)
	}
	for i := 0; i < opt.Workers; i++ {
		c.wg.Add(1)
		go c.worker()
	}
	return &Cache{core: c}, nil
}

// reserveArena maps most slots of size bytes, the first slots of them readable and writable,
// the rest PROT_NONE (Grow opens them). MAP_NORESERVE: untouched pages cost nothing.
func reserveArena(slots, most, size int) ([]byte, error) {
	arena, err := unix.Mmap(-1, 0, most*size, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	if err := unix.Mprotect(arena[:slots*size], unix.PROT_READ|unix.PROT_WRITE); err != nil {
		unix.Munmap(arena)
		return nil, err
	}
	return arena, nil
}

// Close stops the readahead workers, waits for the loads in progress (cancelled) and releases
// the arena. No Fill or Pin may run or follow.
func (c *core) Close() error {
	c.cancel()
	c.wg.Wait()
	c.loads.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pages, c.lru, c.ahead, c.free = nil, nil, nil, nil
	return unix.Munmap(c.arena)
}

// Crowded reports whether readers pin more than half of the slots (pages being loaded do not
// count: a load holds its slots until it ends whatever readers do): a reader should then not
// hold pages for long (Pins), so that other readers and readahead keep room. (Counting loads
// made an object store mount, whose readahead keeps --s3-concurrency blocks loading, look
// crowded all the time, and every read of small records took a copy.)
// Read without the lock (once a request): the sections that change the counts set it.
func (c *core) Crowded() bool { return c.crowded.Load() }

// crowdLocked sets what Crowded reports from the counts; every section that changes pinned,
// loading or slots calls it before it lets go of c.mu. Caller holds c.mu.
func (c *core) crowdLocked() { c.crowded.Store(2*(c.pinned-c.loading) > c.slots) }

// Reserve takes up to n bytes of the cache's budget (whole pages, never leaving fewer than
// MinPages nor less than Options.Keep) out of its service for memory its owner keeps elsewhere (view: the epochs' order
// state), so that the two together stay within the budget. It returns the bytes taken;
// Capacity shrinks by as much. Free slots go first, then the least recently used unpinned
// pages; the slots' memory is given back to the kernel (untouched, it costs nothing).
func (c *core) Reserve(n int64) int64 {
	ps := int64(c.opt.PageSize)
	c.mu.Lock()
	var taken []int
	for int64(len(taken))*ps < n && c.slots > MinPages && int64(c.slots-1)*ps >= c.opt.Keep && c.slotFreeLocked(false) {
		nf := len(c.free)
		taken = append(taken, c.free[nf-1])
		c.free = c.free[:nf-1]
		c.slots--
	}
	c.crowdLocked()
	c.mu.Unlock()
	for _, s := range taken {
		_ = unix.Madvise(c.arena[int64(s)*ps:int64(s+1)*ps], unix.MADV_DONTNEED)
	}
	return int64(len(taken)) * ps
}

// Grow puts up to n more bytes of pages in service (whole pages, within Options.Max) and
// returns the bytes added; Capacity grows by as much. It adds nothing where the kernel refuses
// the memory (strict overcommit). A mount grows its cache when its readers read at more
// places at once than it was planned for (mount/grow.go). Slots Reserve took do not come back.
func (c *core) Grow(n int64) int64 {
	ps := int64(c.opt.PageSize)
	c.mu.Lock()
	defer c.mu.Unlock()
	k := int(min(n/ps, int64(len(c.spare))))
	if k <= 0 {
		return 0
	}
	// The spare slots are the arena's top ones, lowest last: the k taken are contiguous.
	ns := len(c.spare)
	lo := int64(c.spare[ns-1]) * ps
	if err := unix.Mprotect(c.arena[lo:lo+int64(k)*ps], unix.PROT_READ|unix.PROT_WRITE); err != nil {
		return 0
	}
	c.free = append(c.free, c.spare[ns-k:]...)
	c.spare = c.spare[:ns-k]
	c.slots += k
	c.crowdLocked()
	return int64(k) * ps
}

// PageSize returns the page size.
func (c *core) PageSize() int { return c.opt.PageSize }

// Capacity returns the byte budget actually used (whole pages).
func (c *core) Capacity() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(c.slots) * int64(c.opt.PageSize)
}

// ErrRange is returned for reads outside a file.
var ErrRange = errors.New("read outside the file")

// Fill copies len(p) bytes of file id at off into p, loading missing pages: it fills all of p
// or returns an error (a read that would pass the end of the file is ErrRange, never a short
// read). ctx bounds the wait for pages that another reader is loading; the time waited goes to
// w (nil: not counted).
func (c *Cache) Fill(ctx context.Context, w *Waits, id FileID, off int64, p []byte) error {
	id |= c.ns
	if len(p) == 0 {
		return nil
	}
	size := c.src.Size(id)
	if off < 0 || off+int64(len(p)) > size {
		return fmt.Errorf("file %d: [%d, %d) of %d bytes: %w", id, off, off+int64(len(p)), size, ErrRange)
	}
	ps := int64(c.opt.PageSize)
	first, last := off/ps, (off+int64(len(p))-1)/ps
	var small [4]*entry
	ents := small[:0]
	if n := int(last - first + 1); n > len(small) {
		ents = make([]*entry, 0, n)
	}
	mark := c.made.Load()
	ents, _ = c.pin(id, first, last, size, forReader, privateWhenFull, ents)
	err := waitAll(ctx, w, ents)
	if joinedFailed(ctx, err, ents, mark) {
		// Once more with a load of its own, as retryJoined.
		c.unpin(ents)
		ents, _ = c.pin(id, first, last, size, forReader, privateWhenFull, ents[:0])
		err = waitAll(ctx, w, ents)
	}
	defer c.unpin(ents)
	if err != nil {
		return err
	}
	n := 0
	for _, e := range ents {
		start := max(off+int64(n)-e.key.page*ps, 0)
		n += copy(p[n:], e.buf[start:])
	}
	c.stats.served.Add(uint64(n))
	return nil
}

// touchLocked notes a pin of e, a page cached or loading, by a reader or (prefetch) by
// readahead. A reader's first read of a page read ahead moves it among the pages read;
// readahead's request for a page already read (a block cached from an earlier epoch, read
// again in this one) moves it among the pages read ahead, kept until its reader comes. Caller
// holds c.mu.
func (c *core) touchLocked(e *entry, prefetch bool) {
	switch {
	case prefetch && e.elem != nil && !e.inAhead():
		c.lru.Remove(e.elem)
		e.elem, e.kept, e.seq = c.ahead.PushFront(e), true, c.seq
	case prefetch:
		return
	case e.elem == nil:
		c.stats.merged.Add(1)
		if e.ahead != nil {
			e.ahead.Promote() // a reader waits for readahead's load: serve it as a reader's
		}
		e.prefetched = false // it joins the pages read once loaded
	case e.inAhead():
		c.ahead.Remove(e.elem)
		c.stats.hits.Add(1)
		if e.prefetched {
			c.stats.readaheadHits.Add(1)
		}
		e.elem, e.prefetched, e.kept = c.lru.PushFront(e), false, false
	default:
		c.lru.MoveToFront(e.elem)
		c.stats.hits.Add(1)
	}
}

// slotFreeLocked makes sure a slot is free, evicting an unpinned page if need be (evictLocked),
// and reports whether one is. Caller holds c.mu.
func (c *core) slotFreeLocked(prefetch bool) bool {
	return len(c.free) > 0 || c.evictLocked(prefetch)
}

// evictLocked evicts one unpinned page and reports whether it could: a stale page read ahead;
// else the least recently used of the pages read; else, for a reader only, the page read
// ahead last (the furthest ahead). Pages read ahead go last because a reader reads a record
// once an epoch: a page it has read is likely done with, a page read ahead is what it comes
// to next (LRU alone evicts a page read ahead a while ago before one read a moment ago, and
// readahead then reads it twice). Readahead never evicts a page read ahead (it stops
// instead) unless it is stale: twice as many pages as the cache holds were loaded since, and
// no reader came for it (an epoch left half read; a reader comes for a page within the
// readahead, at most half the cache). Caller holds c.mu.
func (c *core) evictLocked(prefetch bool) bool {
	if el := c.ahead.Back(); el != nil {
		if v := el.Value.(*entry); v.refs == 0 && c.seq-v.seq > 2*uint64(c.slots) {
			c.removeLocked(v)
			return true
		}
	}
	for el := c.lru.Back(); el != nil; el = el.Prev() {
		if v := el.Value.(*entry); v.refs == 0 {
			c.removeLocked(v)
			return true
		}
	}
	if prefetch {
		return false
	}
	for el := c.ahead.Front(); el != nil; el = el.Next() {
		if v := el.Value.(*entry); v.refs == 0 {
			c.removeLocked(v)
			return true
		}
	}
	return false
}

// newEntryLocked creates a loading entry for k, with the load's reference, taking a free slot
// or evicting an unpinned page (evictLocked; prefetch: for readahead). When no slot can be had
// the page gets a private buffer and is not cached. Caller holds c.mu.
func (c *core) newEntryLocked(k key, size int64, prefetch bool) *entry {
	ps := int64(c.opt.PageSize)
	n := min(ps, size-k.page*ps)
	e := &entry{key: k, slot: -1, load: flight.New[struct{}](), refs: 1, made: c.made.Add(1)}
	if c.slotFreeLocked(prefetch) {
		nf := len(c.free)
		e.slot = c.free[nf-1]
		c.pinned++
		c.loading++
		c.free = c.free[:nf-1]
		base := int64(e.slot) * ps
		// The capacity reaches the slot's end, so a short last page may be read to an
		// alignment boundary (source.Blocks.Fill with direct I/O).
		e.buf = c.arena[base : base+n : base+ps]
		c.pages[k] = e
	} else {
		e.buf = make([]byte, n)
		c.stats.overflow.Add(1)
	}
	return e
}

// pushLocked puts e, just loaded, at the front of its list: ahead while no reader has read it,
// else lru. Caller holds c.mu.
func (c *core) pushLocked(e *entry) *list.Element {
	c.seq++
	e.seq = c.seq
	if e.inAhead() {
		return c.ahead.PushFront(e)
	}
	return c.lru.PushFront(e)
}

// inAhead reports whether e, once loaded, is in the ahead list. Caller holds c.mu.
func (e *entry) inAhead() bool { return e.prefetched || e.kept }

// removeLocked drops a loaded, unpinned page and frees its slot. Caller holds c.mu.
func (c *core) removeLocked(e *entry) {
	if e.inAhead() {
		c.ahead.Remove(e.elem)
	} else {
		c.lru.Remove(e.elem)
	}
	e.elem = nil
	delete(c.pages, e.key)
	c.free = append(c.free, e.slot)
	c.stats.evictions.Add(1)
	if e.prefetched {
		c.stats.readaheadWasted.Add(1)
	}
}

// unpin drops the references taken by pin.
func (c *core) unpin(ents []*entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range ents {
		c.unrefLocked(e)
	}
	c.crowdLocked()
}

// unrefLocked drops one reference to e: the last one unpins its slot (a failed load's slot
// was freed when it failed, see load). Caller holds c.mu.
func (c *core) unrefLocked(e *entry) {
	e.refs--
	if e.refs > 0 || e.slot < 0 {
		return
	}
	c.pinned--
}

// present appends to out the pages first..last of file id that are cached or loading.
func (c *core) present(id FileID, first, last int64, out []*entry) []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	for pg := first; pg <= last; pg++ {
		if e := c.pages[key{id, pg}]; e != nil {
			out = append(out, e)
		}
	}
	return out
}
