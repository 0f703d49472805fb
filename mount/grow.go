package mount

import (
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

// Readers at once. The memory plan sizes the daemon's cache for one reader's window and
// readahead, twice over (memory.PlanFor). Readers at different places of the order (DataLoader
// workers and ranks reading their shards) each need a window of their own: with fewer pages,
// each evicts pages the others have not read yet, and they are loaded again, a compressed
// pack's frames decompressed again for each record (four `dd` of shards of 64 MiB zstd blocks
// through a 128 MiB cache loaded 7.6 bytes for each byte served). So a mount of one dataset
// grows its cache, once a second, to a window (Plan.need.Window) for each reader that read in
// the last growWindow and one more, within its budget (growMax). The blocks kept resident in
// the kernel's page cache give up their share as it grows (read with O_DIRECT from then on,
// their pages dropped), so the two stay within the budget together. The cache never shrinks:
// what it took stays in service for the mount's life, inside the budget.
const (
	growEvery  = time.Second
	growWindow = 2 * time.Second
)

// growMax is the most the cache of p may grow to: the budget, in whole pages, for a mount of
// one dataset whose cache does not hold it whole (local files, or an object store without a
// disk cache, whose budget beyond the cache is not used); else the planned size.
func (p *Plan) growMax() int64 {
	_, one := p.shape().(onePlan)
	if !one || p.mem.Footprint <= p.mem.CacheSize || (p.loc.Kind == Remote && p.disk != nil) {
		return p.mem.CacheSize
	}
	return max(p.mem.CacheSize, p.mem.Budget/cache.DefaultPageSize*cache.DefaultPageSize)
}

// cutStreams returns streams that also reads blocks from the resident cut on with O_DIRECT;
// the cut starts at the plan's resident blocks and only goes down (shrinkResident).
func (p *Plan) cutStreams(streams func(source.FileID) bool) func(source.FileID) bool {
	p.cut = new(atomic.Int64)
	p.cut.Store(int64(p.mem.ResidentBlocks))
	return func(id source.FileID) bool {
		return streams(id) || int64(layout.BlockOfFile(id)) >= p.cut.Load()
	}
}

// growCache grows c for the readers active says read at once (grower.step), every growEvery,
// until the returned function is called (once or more). order is what the order state took
// of the budget.
func (p *Plan) growCache(c *cache.Cache, order int64, active func(time.Duration) int) (stop func()) {
	g := &grower{p: p, c: c, most: p.growMax() - order, order: order}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(growEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				g.step(active(growWindow))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// grower grows a mount's cache for its readers at once.
type grower struct {
	p     *Plan
	c     *cache.Cache
	most  int64 // the most pages the cache may have in service: growMax less the order state
	order int64 // what the order state took of the budget
	told  int   // the most readers the budget was said to be short for (0: not said)
}

// step grows the cache to hold n+1 windows, up to most, for n readers at once (n >= 2: one
// reader has the plan's two windows), and shrinks the resident set to what is left of the
// budget beside the cache and the order state. When the budget cannot hold them, it says so
// once (and again for more readers).
func (g *grower) step(n int) {
	p := g.p
	have := g.c.Capacity()
	need := int64(n+1) * p.need.Window
	if n < 2 || need <= have || p.mem.Footprint <= have {
		return // one reader, room enough, or the whole dataset cached
	}
	if need > g.most && n > g.told {
		g.told = n
		log.Printf("blockfs: warning: %d readers at once need a cache of %s (a window of %s each and one more), more than the budget of %s allows (%s): they evict pages the others have yet to read, which are loaded again%s; raise %s, or pack smaller blocks",
			n, ibytes(need), ibytes(p.need.Window), ibytes(p.mem.Budget), p.mem.BudgetReason, decompressed(p), optname.Flag("cache-size"))
	}
	got := g.c.Grow(min(need, g.most) - have)
	if got <= 0 {
		return
	}
	was, now := p.shrinkResident(p.mem.Budget - have - got - g.order)
	resident := ""
	if was != now {
		resident = fmt.Sprintf("; blocks resident in the kernel's page cache: %d -> %d", was, now)
	}
	log.Printf("blockfs: %d readers at once: cache %s -> %s (a window of %s each and one more, within the budget of %s)%s",
		n, ibytes(have), ibytes(have+got), ibytes(p.need.Window), ibytes(p.mem.Budget), resident)
}

// decompressed says, for a compressed pack, that a page loaded again is a frame decompressed
// again.
func decompressed(p *Plan) string {
	if p.mem.Decode > 0 {
		return " (a compressed pack's frames decompressed again)"
	}
	return ""
}

// shrinkResident lowers the resident cut to the blocks that fit in room (never raises it) and
// drops the pages of the blocks it gave up from the kernel's page cache. It returns the cut
// before and after; both are the plan's resident blocks when there is no cut.
func (p *Plan) shrinkResident(room int64) (was, now int) {
	if p.cut == nil {
		return p.mem.ResidentBlocks, p.mem.ResidentBlocks
	}
	_, k := memory.ResidentBlocks(p.ds, max(0, room))
	was = int(p.cut.Load())
	if k >= was {
		return was, was
	}
	p.cut.Store(int64(k))
	stored := p.ds.Stored()
	for b := k; b < was; b++ {
		local.Uncache(stored, layout.DataFile(b), layout.IDsFile(b), layout.OffsetsFile(b))
	}
	return was, k
}
