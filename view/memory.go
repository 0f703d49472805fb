package view

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
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

// DefaultCacheSize is the cache budget of a dataset too large for its whole footprint to be
// cached by default.
const DefaultCacheSize = 512 << 20

// MemoryPlan is how a mount uses memory: the cache budget and whether block reads go around
// the kernel's page cache, each with the reason, for .blockfs/info.json.
type MemoryPlan struct {
	Footprint   int64  // bytes the dataset's files take as whole cache pages
	MemTotal    int64  // the machine's RAM (0 if unknown)
	CacheSize   int64  // the cache budget
	CacheReason string // why that budget
	Direct      bool   // block data read with O_DIRECT
	Reason      string // why
}

// PlanMemory applies the documented rules (docs/PERFORMANCE.md, "Memory"):
//
//   - cache budget: cacheSize when given (> 0); otherwise the dataset's whole footprint when it
//     is at most a quarter of RAM (every page read from disk once per mount), else 512 MiB;
//     never below need (the window being read plus readahead);
//   - direct I/O (auto): on when the cache holds the whole footprint (one copy in memory is
//     enough); off when the footprint is at most half of RAM (the kernel's page cache keeps
//     the block files between epochs, so the disk is read once); on otherwise (the kernel
//     could not keep them, and caching each block twice would only evict other memory).
func PlanMemory(ds *layout.Dataset, pageSize, cacheSize, need int64, direct Direct, memTotal int64) MemoryPlan {
	p := MemoryPlan{Footprint: Footprint(ds, pageSize), MemTotal: memTotal, CacheSize: cacheSize}
	switch {
	case cacheSize > 0:
		p.CacheReason = "--cache-size"
	case memTotal > 0 && p.Footprint <= memTotal/4:
		p.CacheSize = max(p.Footprint, need)
		p.CacheReason = fmt.Sprintf("the dataset's %s fit in a quarter of RAM (%s): cached whole", ibytes(p.Footprint), ibytes(memTotal))
	case memTotal <= 0:
		p.CacheSize = max(DefaultCacheSize, need)
		p.CacheReason = "the machine's RAM is unknown: the default budget"
	default:
		p.CacheSize = max(DefaultCacheSize, need)
		p.CacheReason = fmt.Sprintf("the dataset's %s exceed a quarter of RAM (%s): the default budget", ibytes(p.Footprint), ibytes(memTotal))
	}
	p.CacheSize = max(p.CacheSize, int64(cache.MinPages)*pageSize)
	p.CacheSize = (p.CacheSize + pageSize - 1) / pageSize * pageSize
	switch {
	case direct == DirectOn:
		p.Direct, p.Reason = true, "--direct on"
	case direct == DirectOff:
		p.Direct, p.Reason = false, "--direct off"
	case p.CacheSize >= p.Footprint:
		p.Direct, p.Reason = true, "the cache holds the whole dataset: one copy in memory, the disk read once per mount"
	case memTotal > 0 && p.Footprint <= memTotal/2:
		p.Direct, p.Reason = false, fmt.Sprintf("the dataset (%s) fits in half of RAM (%s): the kernel's page cache keeps the block files between epochs", ibytes(p.Footprint), ibytes(memTotal))
	case memTotal <= 0:
		p.Direct, p.Reason = true, "the machine's RAM is unknown and the cache does not hold the whole dataset: blocks are not cached twice"
	default:
		p.Direct, p.Reason = true, fmt.Sprintf("the dataset (%s) is larger than half of RAM (%s): the kernel could not keep it between epochs; blocks are not cached twice", ibytes(p.Footprint), ibytes(memTotal))
	}
	return p
}

// Footprint returns the bytes a dataset's files take in a cache of pageSize pages: each file
// (data, ids, offsets, names) rounded up to whole pages.
func Footprint(ds *layout.Dataset, pageSize int64) int64 {
	pages := func(n int64) int64 { return (n + pageSize - 1) / pageSize }
	var total int64
	for b := 0; b < ds.Blocks(); b++ {
		for _, id := range []layout.FileID{layout.DataFile(b), layout.IDsFile(b), layout.OffsetsFile(b)} {
			total += pages(ds.Size(id))
		}
	}
	if id, ok := ds.Names(); ok {
		total += pages(ds.Size(id))
	}
	return total * pageSize
}

// MemTotal returns the machine's RAM in bytes from /proc/meminfo, or 0 if it cannot tell.
func MemTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

func ibytes(n int64) string { return humanize.IBytes(uint64(n)) }

// CacheNeed is the least page cache a mount needs: the window being read (mix blocks of up to
// the largest block's size) plus the readahead, and never less than cache.MinPages pages (a
// read pins its pages while the reply is written, and readahead needs room beside it).
type CacheNeed struct {
	MaxBlock  int64 // the largest block's data
	Mix       int   // blocks per window
	Readahead int64 // bytes prefetched ahead of a reader
	Window    int64 // MaxBlock x Mix + Readahead
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
	n.Window = n.MaxBlock*int64(n.Mix) + readahead
	n.Need = max(n.Window, n.MinCache)
	return n
}
