// Package memory is a mount's memory plan: PERFORMANCE.md's rules as pure functions of the
// dataset, the options and the memory the process really has (its cgroup's limit, not the
// host's RAM: internal/sysmem). PlanFor chooses the budget (beside what the other mounts on
// the machine claimed and a trainer's headroom), the page cache's size, direct I/O and the
// resident set; info.json shows the Plan whole. It knows nothing of mounts.
package memory

import (
	"fmt"

	"github.com/dustin/go-humanize"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source/stack"
)

// Direct is how a mount reads block data from disk.
type Direct int

const (
	DirectAuto Direct = iota // choose by the dataset's size against the cache and RAM
	DirectOn                 // O_DIRECT: disk to cache, around the kernel's page cache
	DirectOff                // buffered reads: the kernel's page cache keeps the block files
)

// ParseDirect parses "auto", "on" or "off".
func ParseDirect(s string) (Direct, error) {
	switch s {
	case "auto":
		return DirectAuto, nil
	case "on":
		return DirectOn, nil
	case "off":
		return DirectOff, nil
	}
	return 0, fmt.Errorf("unknown value %q (want auto, on or off)", s)
}

// DefaultCacheSize is the most the daemon's own cache takes by default when the dataset is not
// cached whole in it: room for the windows and readahead of several readers at different
// places. The rest of the memory budget keeps blocks resident in the kernel's page cache.
const DefaultCacheSize = 512 << 20

// MinHeadroom is the least memory the default budget leaves to the trainer (unless that is
// more than half of the memory: then half).
const MinHeadroom = 1 << 30

// Plan is how a mount uses memory: the budget for data (the daemon's cache plus the
// blocks it keeps resident in the kernel's page cache), how it is split, and whether block
// reads go around the kernel's page cache, each with the reason, for .blockfs/info.json.
type Plan struct {
	Size      int64         // the dataset: the bytes of its files (DataBytes)
	Stored    int64         // the bytes of its files as stored (StoredBytes): less when compressed
	Footprint int64         // what the cache needs to hold it whole: each file in whole pages
	Memory    sysmem.Memory // what the machine and the memory cgroup give (zero when unknown)
	Total     int64         // the memory the plan is made within: the least of RAM and the cgroup's limit
	Headroom  int64         // what the default budget leaves to the trainer
	Claimed   int64         // what the other blockfs mounts up on the machine planned for data
	Budget    int64         // memory for data: CacheSize + Resident (at most; Resident is capped by the data)
	// Decode is what decompressing a compressed pack's frames holds beside the cache at most
	// (stack.DecodeMemory); an automatic budget leaves it out. 0 for blocks stored raw.
	Decode int64
	// BudgetReason says where the budget comes from.
	BudgetReason string
	CacheSize    int64  // the daemon's cache (its arena)
	CacheReason  string // why that size
	// Resident is the bytes of block files kept in the kernel's page cache across epochs:
	// blocks 0 to ResidentBlocks-1 are read buffered, the others with O_DIRECT, so that only
	// the rest streams from disk each epoch (Direct is then true).
	Resident       int64
	ResidentBlocks int
	Direct         bool   // some or all block data read with O_DIRECT
	Reason         string // why
}

// Headroom returns what the default budget leaves to the trainer out of total: a quarter,
// and at least MinHeadroom (or half of total, if that is less).
func Headroom(total int64) int64 {
	return max(total/4, min(MinHeadroom, total/2))
}

// PlanFor applies the documented rules (docs/PERFORMANCE.md, "Memory rules"). mem is what
// the process has (sysmem.Read); claimed is what the other blockfs mounts up on the machine
// planned for data (daemon.Claimed); cacheSize is --cache-size (0: auto); need is what the windows
// being read and the readahead take of the daemon's cache.
//
//   - total: the least of the RAM and the memory cgroup's limit (v1 or v2, the tightest of
//     the daemon's cgroup and its ancestors);
//   - budget: --cache-size when given; otherwise the total less the headroom (a quarter,
//     at least 1 GiB) less what the other mounts claimed, and no more than what is free now
//     (available memory, or the cgroup's limit less its usage plus its page cache), less what
//     decompressing a compressed pack's frames holds (Decode); never below need;
//   - the daemon's cache: the whole dataset when its footprint fits the budget (auto: and a
//     quarter of the total), then read with O_DIRECT; otherwise the budget's share for windows
//     and readahead: half the budget up to 512 MiB, but at least twice the need (within the
//     budget) and never less than the need; the whole budget with --direct on;
//   - resident: the rest of the budget keeps blocks 0, 1, ... (as many whole blocks as fit,
//     in block order) in the kernel's page cache: they are read buffered, the rest with
//     O_DIRECT, so the kernel never holds more than the budget of block files and each epoch
//     after the first reads from disk only what is not resident. --direct off reads every
//     block buffered (the kernel decides); --direct on none.
func PlanFor(ds *layout.Dataset, pageSize, cacheSize, need int64, direct Direct, mem sysmem.Memory, claimed int64) Plan {
	p := Plan{Size: DataBytes(ds), Stored: StoredBytes(ds), Footprint: Footprint(ds, pageSize), Memory: mem, Total: mem.Total(), Claimed: claimed}
	p.Headroom = Headroom(p.Total)
	round := func(n int64) int64 {
		n = max(n, int64(cache.MinPages)*pageSize)
		return (n + pageSize - 1) / pageSize * pageSize
	}
	p.Budget, p.BudgetReason = Budget(cacheSize, need, mem, p.Headroom, claimed)
	if c := ds.Stored().Manifest.Compression; c != nil {
		p.Decode = stack.DecodeMemory(c.Frame)
		if b := p.Budget - p.Decode; cacheSize <= 0 && p.Total > 0 && b >= need {
			p.Budget = b
			p.BudgetReason += fmt.Sprintf(", less %s to decompress frames", ibytes(p.Decode))
		}
	}
	whole := p.Footprint <= p.Budget
	if cacheSize <= 0 && p.Total > 0 {
		whole = whole && p.Size <= p.Total/4
	}
	switch {
	case whole && cacheSize > 0:
		p.CacheSize, p.CacheReason = cacheSize, optname.Flag("cache-size")
	case whole:
		p.CacheSize = max(p.Footprint, need)
		p.CacheReason = fmt.Sprintf("the dataset's %s%s fit in the budget and a quarter of the memory (%s): cached whole", ibytes(p.Size), p.inPages(), ibytes(p.Total))
	case direct == DirectOn:
		p.CacheSize = max(p.Budget, need)
		p.CacheReason = optname.Flag("direct") + " on: the whole budget"
	default:
		// Twice the need: with only the need, readahead evicts blocks it fetched before their
		// reader comes and the disk is read up to twice (a 128 MiB cache under 80 MiB of window
		// and readahead read 1.6-1.9 GiB per 1 GiB epoch; 160 MiB read 1 GiB).
		p.CacheSize = max(need, min(max(2*need, min(DefaultCacheSize, p.Budget/2)), p.Budget))
		p.CacheReason = fmt.Sprintf("the dataset's %s%s exceed the cache's share of the budget: windows and readahead", ibytes(p.Size), p.inPages())
	}
	if cacheSize > 0 && !whole && p.CacheSize == cacheSize {
		p.CacheReason = optname.Flag("cache-size")
	}
	p.CacheSize = round(p.CacheSize)
	if !whole && direct != DirectOn {
		p.Resident, p.ResidentBlocks = ResidentBlocks(ds, p.Budget-p.CacheSize)
	}
	switch {
	case direct == DirectOn:
		p.Direct, p.Reason = true, optname.Flag("direct")+" on"
	case direct == DirectOff:
		p.Direct, p.Reason = false, optname.Flag("direct")+" off"
	case whole:
		p.Direct, p.Reason = true, "the cache holds the whole dataset: one copy in memory, the disk read once per mount"
	case p.ResidentBlocks >= ds.Stored().Blocks():
		p.Direct, p.Reason = false, fmt.Sprintf("the dataset (%s) fits in the budget beside the cache: the kernel's page cache keeps every block between epochs", ibytes(p.Size))
	default:
		p.Direct = true
		p.Reason = fmt.Sprintf("the dataset (%s) exceeds the budget: blocks 0-%d (%s) stay resident in the kernel's page cache, the other %d stream with O_DIRECT",
			ibytes(p.Size), p.ResidentBlocks-1, ibytes(p.Resident), ds.Stored().Blocks()-p.ResidentBlocks)
		if p.ResidentBlocks == 0 {
			p.Reason = fmt.Sprintf("the dataset (%s) exceeds the budget and no block fits beside the cache: every block streams with O_DIRECT", ibytes(p.Size))
		}
	}
	return p
}

// Budget returns the budget for data and where it comes from (PlanFor's rules): a mixture
// plans its sources' shares within it.
func Budget(cacheSize, need int64, mem sysmem.Memory, headroom, claimed int64) (int64, string) {
	total := mem.Total()
	switch {
	case cacheSize > 0:
		return cacheSize, optname.Flag("cache-size")
	case total <= 0:
		return max(DefaultCacheSize, need), "the memory is unknown: the default budget"
	}
	budget := max(0, total-headroom-claimed)
	reason := fmt.Sprintf("%s (%s) less %s left to the trainer", mem.Source(), ibytes(total), ibytes(headroom))
	if claimed > 0 {
		reason += fmt.Sprintf(" and %s the other blockfs mounts planned", ibytes(claimed))
	}
	if free := mem.Free(); free > 0 && free < budget {
		budget = free
		reason = fmt.Sprintf("what is free now (%s of %s, %s)", ibytes(free), ibytes(total), mem.Source())
	}
	if budget < need {
		budget = need
		reason += fmt.Sprintf("; raised to %s, what the windows and readahead need", ibytes(need))
	}
	return budget, reason
}

// inPages says what the dataset takes in the cache's pages when that is well above its size
// (small files each take a page).
func (p Plan) inPages() string {
	if p.Footprint <= p.Size+p.Size/4 {
		return ""
	}
	return fmt.Sprintf(" (%s in the cache's pages)", ibytes(p.Footprint))
}

// ResidentBlocks returns how many leading blocks (and their bytes, in 4 KiB pages) fit in room:
// the blocks of the files as stored (the kernel caches compressed files compressed), which
// are the ones Plan.Streams is asked of.
func ResidentBlocks(ds *layout.Dataset, room int64) (int64, int) {
	var used int64
	ds = ds.Stored()
	for b := 0; b < ds.Blocks(); b++ {
		var n int64
		for _, id := range []layout.FileID{layout.DataFile(b), layout.IDsFile(b), layout.OffsetsFile(b)} {
			n += (ds.StoredSize(id) + 4095) / 4096 * 4096
		}
		if used+n > room {
			return used, b
		}
		used += n
	}
	return used, ds.Blocks()
}

// Streams reports whether file id is read with O_DIRECT under the plan (false: buffered, kept
// by the kernel's page cache). A mount gives it to source/local and the disk cache.
func (p Plan) Streams(id layout.FileID) bool {
	if !p.Direct {
		return false
	}
	if p.ResidentBlocks == 0 {
		return true
	}
	return layout.BlockOfFile(id) >= p.ResidentBlocks
}

// Facts returns the plan for info.json's "memory".
func (p Plan) Facts() map[string]any {
	m := p.Memory
	return map[string]any{
		"ram": m.RAM, "available": m.Available, "cgroup": m.Cgroup, "cgroup_version": m.Version,
		"cgroup_limit": m.Limit, "cgroup_usage": m.Usage, "cgroup_reclaimable": m.Reclaimable, "total": p.Total, "total_source": m.Source(),
		"dataset_bytes": p.Size, "dataset_stored_bytes": p.Stored, "dataset_in_cache": p.Footprint,
		"free": m.Free(), "headroom": p.Headroom, "claimed_by_other_mounts": p.Claimed, "budget": p.Budget, "budget_reason": p.BudgetReason,
		"cache": p.CacheSize, "resident": p.Resident, "resident_blocks": p.ResidentBlocks, "decode": p.Decode,
	}
}

// DataBytes returns the bytes of a dataset's files (data, ids, offsets, names): its size for
// the memory plan, as it is on disk and in the kernel's page cache.
func DataBytes(ds *layout.Dataset) int64 {
	var total int64
	for id := layout.FileID(0); id <= layout.NamesFile(ds.Blocks()); id++ {
		total += ds.Size(id)
	}
	return total
}

// StoredBytes returns the bytes of a dataset's files as stored: DataBytes but for compressed
// blocks, whose compressed bytes are on disk, in the disk cache and in the kernel's page cache.
func StoredBytes(ds *layout.Dataset) int64 {
	ds = ds.Stored()
	var total int64
	for id := layout.FileID(0); id <= layout.NamesFile(ds.Blocks()); id++ {
		total += ds.StoredSize(id)
	}
	return total
}

// Footprint returns the bytes a dataset's files take in a cache of pageSize pages: each file
// (data, ids, offsets, names) rounded up to whole pages. It is what the daemon's cache needs
// to hold the dataset whole, and more than its size (DataBytes) when its files are small: a
// block of 4 KiB takes a page of 1 MiB.
func Footprint(ds *layout.Dataset, pageSize int64) int64 {
	pages := func(n int64) int64 { return (n + pageSize - 1) / pageSize }
	var total int64
	for b := 0; b < ds.Blocks(); b++ {
		total += BlockPages(ds, b, pageSize) / pageSize
	}
	if id, ok := ds.Names(); ok {
		total += pages(ds.Size(id))
	}
	return total * pageSize
}

// BlockPages returns the bytes block b's files (data, ids, offsets) take in pages of pageSize.
func BlockPages(ds *layout.Dataset, b int, pageSize int64) int64 {
	var n int64
	for _, id := range []layout.FileID{layout.DataFile(b), layout.IDsFile(b), layout.OffsetsFile(b)} {
		n += (ds.Size(id) + pageSize - 1) / pageSize
	}
	return n * pageSize
}

func ibytes(n int64) string { return humanize.IBytes(uint64(n)) }

// CacheNeed is the least page cache a mount needs: the window being read (mix blocks of up to
// the largest block's size, each in whole cache pages: the cache loads a block's file into
// pages of its own, so a 4 KiB block takes a 1 MiB page) plus the readahead, and never less
// than cache.MinPages pages (a read pins its pages while the reply is written, and readahead
// needs room beside it).
type CacheNeed struct {
	MaxBlock  int64 // the largest block's data
	InCache   int64 // MaxBlock in whole pages: what a block takes of the cache
	Mix       int   // blocks per window
	Readahead int64 // bytes prefetched ahead of a reader
	Window    int64 // InCache x Mix + Readahead
	MinCache  int64 // cache.MinPages pages
	Need      int64 // max(Window, MinCache)
}

// NeedCache returns what a mount of ds with windows of mix blocks and the given readahead
// needs of a cache of pageSize pages.
func NeedCache(ds *layout.Dataset, mix int, readahead, pageSize int64) CacheNeed {
	n := CacheNeed{Mix: max(1, mix), Readahead: readahead, MinCache: int64(cache.MinPages) * pageSize}
	for b := 0; b < ds.Blocks(); b++ {
		n.MaxBlock = max(n.MaxBlock, int64(ds.BlockBytes(b)))
	}
	n.InCache = (n.MaxBlock + pageSize - 1) / pageSize * pageSize
	n.Window = n.InCache*int64(n.Mix) + readahead
	n.Need = max(n.Window, n.MinCache)
	return n
}
