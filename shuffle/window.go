package shuffle

import (
	"math"
	"math/bits"

	"github.com/blockfs/blockfs/internal/lru"
)

// Window is a run of consecutive blocks of the epoch's block order whose records are
// permuted together. Immutable.
//
// Its compact form is the permutation of its records: 4 bytes each (perm), or for a window of
// more than BijectionFrom records in order version 2 a keyed bijection computed per index in
// O(1) state (bij); neither when records keep their stored order. With several blocks, a
// table finds the block of a permuted index in a step or two: bucket[v>>shift] is the block
// holding index v&^(1<<shift-1), and buckets are no wider than the window's second smallest
// block (a dataset's last block may be a sliver).
type Window struct {
	Index  int        // window number in the epoch
	Start  uint64     // position of its first record in the epoch
	Count  uint64     // records in the window
	Blocks []int      // stored block indices, in epoch order
	prefix []uint64   // prefix[i] = records in Blocks[:i]
	perm   []uint32   // nil when records keep their stored order or bij permutes them
	bij    *Bijection // nil but for version 2's large windows
	bucket []uint32   // see above; nil with one block or no permutation
	shift  uint
}

// bucketShiftMin bounds the block table to one entry per 2^bucketShiftMin records.
const bucketShiftMin = 6

// buildBuckets fills the block table of a permuted window of several blocks.
func (w *Window) buildBuckets() {
	if len(w.Blocks) < 2 || w.Count == 0 {
		return
	}
	counts := make([]uint64, len(w.Blocks))
	for k := range w.Blocks {
		counts[k] = w.prefix[k+1] - w.prefix[k]
	}
	w.shift = bucketShift(counts)
	w.bucket = make([]uint32, (w.Count-1)>>w.shift+1)
	k := 0
	for j := range w.bucket {
		for w.prefix[k+1] <= uint64(j)<<w.shift {
			k++
		}
		w.bucket[j] = uint32(k)
	}
}

// bucketShift returns the block table's shift for a window of blocks with the given record
// counts: buckets no wider than the second smallest non-empty block, so that a bucket starts
// in at most one block narrower than itself (a dataset's last block, cut short), and no
// narrower than 2^bucketShiftMin records.
func bucketShift(counts []uint64) uint {
	first, second := uint64(math.MaxUint64), uint64(math.MaxUint64)
	for _, n := range counts {
		switch {
		case n == 0:
		case n < first:
			first, second = n, first
		case n < second:
			second = n
		}
	}
	if second == math.MaxUint64 {
		second = first
	}
	return uint(max(bucketShiftMin, bits.Len64(second)-1))
}

// windowOverhead is what a window takes beyond its slices' elements: the struct, its slices'
// allocation rounding and its WindowCache entry. It dominates for the tiny windows of a small
// source of a mixture, which a cache holds by the ten thousand.
const windowOverhead = 128 + 4*16 + lru.EntryBytes

// Bytes returns the memory the window's order state takes.
func (w *Window) Bytes() uint64 {
	return uint64(4*len(w.perm)+4*len(w.bucket)) + uint64(8*len(w.prefix)+8*len(w.Blocks)) + windowOverhead
}

// At returns the stored block and index within it of the window's i-th record (i < Count).
func (w *Window) At(i uint64) (block int, local uint64) {
	k, local := w.Locate(i)
	return w.Blocks[k], local
}

// Locate returns which of the window's blocks (an index into Blocks) holds its i-th record
// (i < Count), and the record's index within that block.
func (w *Window) Locate(i uint64) (k int, local uint64) {
	switch {
	case w.perm != nil:
		i = uint64(w.perm[i])
	case w.bij != nil:
		i = w.bij.At(i)
	}
	if len(w.Blocks) > 1 {
		k = w.blockOf(i)
	}
	return k, i - w.prefix[k]
}

// blockOf returns the index into Blocks of the block holding the window's stored-order
// record v (v < Count).
func (w *Window) blockOf(v uint64) int {
	var k int
	if w.bucket != nil {
		k = int(w.bucket[v>>w.shift])
	}
	for w.prefix[k+1] <= v {
		k++
	}
	return k
}

// LocateRun is Locate for the window's records i0, i0+1, ..., i0+len(locals)-1: it sets
// ks[j] and locals[j] for record i0+j. ks must be as long as locals. A tight loop, for readers
// that copy runs of small records.
func (w *Window) LocateRun(i0 uint64, ks []uint32, locals []uint64) {
	ks = ks[:len(locals)]
	switch {
	case w.bij != nil:
		w.bij.Run(i0, locals)
		for j, v := range locals {
			var k int
			if w.bucket != nil {
				k = int(w.bucket[v>>w.shift])
				for w.prefix[k+1] <= v {
					k++
				}
			}
			ks[j], locals[j] = uint32(k), v-w.prefix[k]
		}
	case w.perm == nil && len(w.Blocks) == 1:
		for j := range locals {
			ks[j], locals[j] = 0, i0+uint64(j)
		}
	case w.perm == nil:
		for j := range locals {
			v := i0 + uint64(j)
			k := w.blockOf(v)
			ks[j], locals[j] = uint32(k), v-w.prefix[k]
		}
	case len(w.Blocks) == 1:
		perm := w.perm[i0 : i0+uint64(len(locals))]
		for j, v := range perm {
			ks[j], locals[j] = 0, uint64(v)
		}
	default:
		perm := w.perm[i0 : i0+uint64(len(locals))]
		for j, p := range perm {
			v := uint64(p)
			k := int(w.bucket[v>>w.shift])
			for w.prefix[k+1] <= v {
				k++
			}
			ks[j], locals[j] = uint32(k), v-w.prefix[k]
		}
	}
}
