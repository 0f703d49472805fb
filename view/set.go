package view

import (
	"context"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/lru"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// Set hands out the epochs of one dataset under one seed, mode and mix, keeping the few most
// recently used (an Epoch costs O(blocks)). Callers should not hold an Epoch longer than they
// use it (an open file may; a directory entry should not), so memory stays bounded by the
// epochs in use. Safe for concurrent use.
type Set struct {
	// Immutable after NewSet.
	DS    *layout.Dataset
	Cache *cache.Cache
	Opt   shuffle.Options // Epoch is ignored

	counts  []uint64 // records per block, shared by every epoch's order
	recent  *lru.Cache[uint64, *Epoch]
	windows *shuffle.WindowCache // every epoch's window permutations, within orderBytes
	order   int64                // the order state's budget, taken from the cache's
}

// epochCacheSize is how many epochs a Set keeps built.
const epochCacheSize = 2

// SetOptions are a Set's order and the budget of its order state.
type SetOptions struct {
	Order shuffle.Options // Epoch is ignored
	// Share is the dataset's share of the cache's budget (a source of a mixture): the order
	// state's budget is OrderBudget against it; 0, the whole cache.
	Share int64
	// Exact makes Share the order state's budget exactly, 0 included: a part of a node-aware
	// mount, whose windows are small and many (OrderBudget's floor, up to 4 MiB, for each of dozens
	// of parts would take the cache's room), or a source read in another's order.
	Exact bool
}

// NewSet validates o.Order against the dataset and returns a Set. The epochs' window
// permutations (order state, 4 bytes a record of a window being read) count against the
// cache's budget: NewSet takes the order state's budget (SetOptions) out of the cache (its
// Reserve) and keeps the windows of every epoch within it, and always the most recent one.
func NewSet(ds *layout.Dataset, c *cache.Cache, o SetOptions) (*Set, error) {
	s := &Set{DS: ds, Cache: c, Opt: o.Order, counts: ds.BlockCounts(), recent: lru.New[uint64, *Epoch](0, epochCacheSize)}
	budget := o.Share
	if !o.Exact {
		if budget == 0 {
			budget = c.Capacity()
		}
		budget = OrderBudget(shuffle.MaxWindowBytes(s.counts, o.Order), min(budget, c.Capacity()))
	}
	s.order = c.Reserve(budget)
	s.windows = shuffle.NewWindowCache(uint64(s.order))
	if _, err := s.Epoch(0); err != nil {
		return nil, err
	}
	return s, nil
}

// Epoch returns epoch n.
func (s *Set) Epoch(n uint64) (*Epoch, error) {
	if e, ok := s.recent.Get(n); ok {
		return e, nil
	}
	opt := s.Opt
	opt.Epoch = n
	e, err := newEpoch(s.DS, s.Cache, s.counts, opt, s.windows)
	if err != nil {
		return nil, err
	}
	s.recent.Add(n, e, 1)
	return e, nil
}

// OrderBytes returns the bytes of the cache's budget that the order state may hold (on the
// Go heap): the daemon's heap limit should allow for them.
func (s *Set) OrderBytes() int64 { return s.order }

// OrderBudget returns the order state a mount keeps, given its largest window's
// (shuffle.MaxWindowBytes) and the cache's budget: room for four such windows (readers at
// four places of the epochs: DataLoader workers or local ranks, a data and an ids reader, a
// reader crossing from one window to the next; with two, a third reader rebuilt a window's
// permutation on every read), at least shuffle.DefaultWindowBytes or OrderWindows windows,
// whichever is less, at most a quarter of the cache. A window larger than that is still kept
// while it is the most recent, so the order state may pass the budget by one window when a
// quarter of the cache holds fewer than one. (The floor in windows: a dataset of small
// windows, a block of a thousand records, took 4 MiB of a small cache for 4 KiB windows, and
// the pages it left were too few for the reads in flight and readahead: blocks were fetched
// twice an epoch.)
func OrderBudget(maxWindow uint64, cacheBytes int64) int64 {
	floor := min(shuffle.DefaultWindowBytes, OrderWindows*int64(maxWindow))
	return min(max(4*int64(maxWindow), floor), cacheBytes/4)
}

// OrderWindows is how many of its largest windows the order state has room for at least,
// within shuffle.DefaultWindowBytes: readers at that many places of the epochs rebuild no
// window's permutation.
const OrderWindows = 64

// FileSize returns the size of the file of kind k over positions rg of epoch n. Only the data of
// part of a variable-length epoch needs the epoch built (its records' sizes depend on the
// order); every other size follows from the dataset, so listing a directory stays cheap.
func (s *Set) FileSize(ctx context.Context, n uint64, k Kind, rg Range) (int64, error) {
	switch {
	case k == IDs:
		return 8 * int64(rg.Len()), nil
	case k == Offsets:
		return 8 * int64(rg.Len()+1), nil
	case s.DS.RecordSize() > 0:
		return int64(rg.Len()) * s.DS.RecordSize(), nil
	case rg == Range{0, s.DS.Records()}:
		return int64(s.DS.Bytes()), nil
	}
	e, err := s.Epoch(n)
	if err != nil {
		return 0, err
	}
	f, err := e.Open(ctx, k, rg)
	if err != nil {
		return 0, err
	}
	return f.Size(), nil
}
