package mount

import (
	"cmp"
	"fmt"
	"log"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount/daemon"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

// Readers at places of the order at once. The memory plan sizes the daemon's cache for one
// reader's window and readahead, twice over (memory.PlanFor). Readers at different places of
// the order (DataLoader workers and ranks reading their shards, ranks a step apart in one
// epoch file) each need the blocks around their place: with fewer pages, each evicts pages the
// others have yet to read, and those are loaded again (a compressed pack's frames decompressed
// again, for each record). So a mount of one dataset looks, once a second, at where the
// readers of epochs' records that read in the last growWindow are (fs.Server.Places), takes
// readers of a file within a window of one another as one place spanning them, and grows its
// cache to what the places hold (each its span and a window) and one window more, when that
// has been wanted for growSteady looks in a row (a loader keeps the last epoch's file open a
// moment at an epoch's end), within its budget and the dataset's pages (growMax). The blocks
// kept resident in the kernel's page cache give up their share as it grows (read with
// O_DIRECT from then on, their pages dropped), so the two stay within the budget together,
// and the mount's claim in the registry says so. The cache never shrinks: what it took stays
// in service for the mount's life, inside the budget.
const (
	growEvery  = time.Second
	growWindow = 2 * time.Second
	growSteady = 3
)

// growable reports whether the cache of p may grow for readers at once: a mount of one
// dataset that its cache does not hold whole, read from local files or from an object store
// without a disk cache (whose budget beyond the cache holds nothing).
func (p *Plan) growable() bool {
	_, one := p.shape().(onePlan)
	return one && p.mem.Footprint > p.mem.CacheSize && !(p.loc.Kind == Remote && p.disk != nil)
}

// growMax is the most the cache of p may grow to: the least of the budget and the dataset's
// pages, in whole pages, where it is growable; else its planned size.
func (p *Plan) growMax() int64 {
	if !p.growable() {
		return p.mem.CacheSize
	}
	most := min(p.mem.Budget, p.mem.Footprint)
	return max(p.mem.CacheSize, most/cache.DefaultPageSize*cache.DefaultPageSize)
}

// cutStreams returns streams that also reads the blocks from the resident cut on with
// O_DIRECT; the cut starts at the plan's resident blocks and only goes down (shrinkResident).
func (p *Plan) cutStreams(streams func(source.FileID) bool) func(source.FileID) bool {
	cut := new(atomic.Int64)
	cut.Store(int64(p.mem.ResidentBlocks))
	p.cut = cut
	return func(id source.FileID) bool {
		return streams(id) || int64(layout.BlockOfFile(id)) >= cut.Load()
	}
}

// growCache grows c for where places says the readers are (grower.step), every growEvery,
// until the returned function is called (once or more). order is what the order state took of
// the budget; facts are the mount's info.json facts, whose claim in the registry (the cache
// and the resident set) each growth writes again.
func (p *Plan) growCache(c *cache.Cache, order int64, places func(time.Duration) map[string][]int64, facts map[string]any) (stop func()) {
	if !p.grows {
		return func() {}
	}
	claim := func(cache, resident int64) {
		f := maps.Clone(facts)
		if mem, ok := f["memory"].(map[string]any); ok {
			mem = maps.Clone(mem)
			mem["cache"], mem["resident"] = cache, resident
			f["memory"] = mem
			daemon.WriteClaim(f, p.mnt)
		}
	}
	g := &grower{p: p, c: c, most: p.growMax() - order, order: order, claim: claim, resident: p.mem.Resident}
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
				g.step(places(growWindow))
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

// look is what one look at the readers found: how many places they are at, and the cache
// they want (grower.want).
type look struct {
	places int
	want   int64
}

// grower grows a mount's cache for its readers at once.
type grower struct {
	p     *Plan
	c     *cache.Cache
	most  int64 // the most pages the cache may have in service: growMax less the order state
	order int64 // what the order state took of the budget
	claim func(cache, resident int64)
	// resident is the resident set's bytes now (the plan's, less what the cache took).
	resident int64
	wanted   []look // the last growSteady looks
	told     int64  // the largest want the budget was said to be short for (0: not said)
	stuck    bool   // the kernel refused the memory (said once)
}

// step grows the cache to want(at) once that has been wanted growSteady times in a row (the
// least of them), up to most, and shrinks the resident set to what is left of the budget
// beside the cache and the order state. When the budget cannot hold it, it says so once (and
// again for a larger want), and stats.json's cache_short says by how much for as long as it
// lasts (the cache's SetShort).
func (g *grower) step(at map[string][]int64) {
	places, want := g.want(at)
	g.wanted = append(g.wanted, look{places, want})
	if len(g.wanted) > growSteady {
		g.wanted = g.wanted[1:]
	}
	have := g.c.Capacity()
	// The least of the looks, and the places of that look (what the log says).
	least := slices.MinFunc(g.wanted, func(a, b look) int { return cmp.Compare(a.want, b.want) })
	places, want = least.places, least.want
	if len(g.wanted) < growSteady {
		return
	}
	if want <= have {
		g.c.SetShort(0)
		return
	}
	p := g.p
	if want > g.most && want > g.told {
		g.told = want
		log.Printf("blockfs: warning: readers at %d places of the order at once need a cache of %s (the windows of %s they read and one more), more than the budget of %s allows (%s): they evict pages the others have yet to read, which are loaded again%s; raise %s, or pack smaller blocks",
			places, ibytes(want), ibytes(p.need.Window), ibytes(p.mem.Budget), p.mem.BudgetReason, decompressed(p), optname.Flag("cache-size"))
	}
	got := g.c.Grow(min(want, g.most) - have)
	g.c.SetShort(want - have - max(got, 0))
	if got <= 0 {
		if min(want, g.most)-have >= cache.DefaultPageSize && !g.stuck {
			g.stuck = true
			log.Printf("blockfs: cannot grow the cache beyond %s for readers at %d places (the kernel refused the memory)", ibytes(have), places)
		}
		return
	}
	was, now, resident, cut := p.shrinkResident(p.mem.Budget - have - got - g.order)
	if cut {
		g.resident = resident
	}
	if g.claim != nil {
		g.claim(have+got+g.order, g.resident)
	}
	gave := ""
	if cut {
		gave = fmt.Sprintf("; blocks resident in the kernel's page cache: %d -> %d", was, now)
	}
	log.Printf("blockfs: readers at %d places of the order at once: cache %s -> %s (the windows of %s they read and one more, within the budget of %s)%s",
		places, ibytes(have), ibytes(have+got), ibytes(p.need.Window), ibytes(p.mem.Budget), gave)
}

// want returns how many places of the order the readers at at are (readers of one file
// within a window of one another are one place, spanning them) and the cache they need: each
// place's span and a window, and one window more (one reader: the plan's two windows).
func (g *grower) want(at map[string][]int64) (places int, want int64) {
	w := g.p.need.Window
	for _, pos := range at {
		slices.Sort(pos)
		first := pos[0]
		for i := 1; i <= len(pos); i++ {
			if i == len(pos) || pos[i]-pos[i-1] > w {
				places++
				want += pos[i-1] - first + w
				if i < len(pos) {
					first = pos[i]
				}
			}
		}
	}
	return places, want + w
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
// before and after, and the resident set's bytes after (ok false: unchanged, or no cut).
func (p *Plan) shrinkResident(room int64) (was, now int, bytes int64, ok bool) {
	if p.cut == nil {
		return p.mem.ResidentBlocks, p.mem.ResidentBlocks, 0, false
	}
	bytes, k := memory.ResidentBlocks(p.ds, max(0, room))
	was = int(p.cut.Load())
	if k >= was {
		return was, was, 0, false
	}
	p.cut.Store(int64(k))
	stored := p.ds.Stored()
	for b := k; b < was; b++ {
		local.Uncache(stored, layout.DataFile(b), layout.IDsFile(b), layout.OffsetsFile(b))
	}
	return was, k, bytes, true
}
