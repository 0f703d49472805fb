package shuffle

import (
	"runtime"
	"slices"
	"sync"

	"github.com/blockfs/blockfs/internal/lru"
)

// WindowCache keeps the most recently used windows of one or more Orders within a byte budget,
// so that the order state of a mount is bounded whatever the record size: a window's
// permutation is 4 bytes a record, and with 4-byte records that is as much as the window's
// data. Orders that share one must differ only in their epoch (the epochs of one mount: same
// counts, seed, mode and mix), since windows are keyed by epoch and index. It always keeps
// the most recent window, so one reader of a window larger than the budget computes it once
// per pass; readers at more places than the budget holds windows of recompute theirs on
// every read. Builds of the same window are merged: concurrent readers wait for one
// computation (without a context: a build cannot fail). Safe for concurrent use.
//
// Lock order: mu, then the lru's own lock; neither is held while a window is built.
type WindowCache struct {
	max uint64 // immutable after NewWindowCache

	lru *lru.Cache[windowKey, *Window]

	mu       sync.Mutex
	building map[windowKey]*build // guarded by mu
}

// windowKey names a window by its epoch, not its Order, so that the cache does not keep the
// Orders of epochs no longer in use alive (O(blocks) each).
type windowKey struct {
	epoch uint64
	w     int
}

// build is a window being computed; done is closed once win is set.
type build struct {
	done chan struct{}
	win  *Window
}

// collectBefore is the permutation size from which a window's build first runs the garbage
// collector: a few builds of a window of 4M records (16 MiB of permutation, a 16 MiB block of
// 4-byte records) would otherwise grow the heap by tens of MiB before the collector caught up,
// while the collection costs a millisecond beside a 40 ms build.
const collectBefore = 4 << 20

// NewWindowCache returns a cache of windows holding at most maxBytes bytes of order state
// (Window.Bytes), and always the most recently used window.
func NewWindowCache(maxBytes uint64) *WindowCache {
	return &WindowCache{max: maxBytes, lru: lru.New[windowKey, *Window](maxBytes, 1),
		building: map[windowKey]*build{}}
}

// MaxBytes returns the cache's budget.
func (c *WindowCache) MaxBytes() uint64 { return c.max }

// Held returns the number of windows the cache holds and their bytes.
func (c *WindowCache) Held() (int, uint64) { return c.lru.Len() }

// get returns window w of o, building it once if no one else is.
func (c *WindowCache) get(o *Order, w int) *Window {
	k := windowKey{o.opt.Epoch, w}
	if win, ok := c.lru.Get(k); ok {
		return win
	}
	c.mu.Lock()
	if b, ok := c.building[k]; ok {
		c.mu.Unlock()
		<-b.done
		return b.win
	}
	if win, ok := c.lru.Get(k); ok { // added between the first look and the lock
		c.mu.Unlock()
		return win
	}
	b := &build{done: make(chan struct{})}
	c.building[k] = b
	c.mu.Unlock()
	if n := o.WindowStart(w+1) - o.WindowStart(w); o.opt.Mode == Full && !o.opt.bijective(n) && 4*n >= collectBefore {
		// Free the windows evicted before this one (if no reader still holds them) before
		// allocating its permutation, so the heap reuses their memory instead of growing.
		// Windows of the other modes have no permutation: nothing to make room for.
		runtime.GC()
	}
	b.win = o.buildWindow(w)
	c.lru.Add(k, b.win, b.win.Bytes())
	c.mu.Lock()
	delete(c.building, k)
	c.mu.Unlock()
	close(b.done)
	return b.win
}

// MaxWindowRecords returns the records of the largest window of any epoch over blocks with the
// given record counts: at most those of the mix largest blocks.
func MaxWindowRecords(counts []uint64, opt Options) uint64 {
	sorted := sortedCounts(counts)
	return sum(sorted[len(sorted)-min(len(sorted), opt.mix()):])
}

// MaxWindowBytes returns the order state of the largest window of an epoch over blocks with
// the given record counts (any epoch: a window's size depends on which blocks fall in it, so
// this bounds it by the mix largest blocks), in Full mode; 0 in the other modes. A permutation
// takes 4 bytes a record; a bijection nothing; the block table 4 bytes a bucket.
func MaxWindowBytes(counts []uint64, opt Options) uint64 {
	if opt.Mode != Full {
		return 0
	}
	sorted := sortedCounts(counts)
	k := min(len(sorted), opt.mix())
	most := sum(sorted[len(sorted)-k:])
	// A window's second smallest block is no smaller than the dataset's.
	table := 4*(most>>bucketShift(counts)+1) + 16*uint64(k) + 8 + windowOverhead
	if !opt.bijective(most) {
		return 4*most + table
	}
	// The largest windows are computed per position, but a window of at most BijectionFrom
	// records holds its permutation: of the windows of mix blocks, or the last, of
	// len(counts) % mix, one whose smallest blocks add up to no more.
	var permuted uint64
	for _, j := range []int{k, len(sorted) % opt.mix()} {
		if j > 0 && sum(sorted[:j]) <= BijectionFrom {
			permuted = max(permuted, min(BijectionFrom, sum(sorted[len(sorted)-j:])))
		}
	}
	return 4*permuted + table
}

// sortedCounts returns a sorted copy of counts.
func sortedCounts(counts []uint64) []uint64 {
	s := slices.Clone(counts)
	slices.Sort(s)
	return s
}

func sum(c []uint64) (n uint64) {
	for _, v := range c {
		n += v
	}
	return n
}
