package shuffle

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/blockfs/blockfs/internal/lru"
)

// Mode selects how much of an epoch is shuffled.
type Mode int

const (
	// Full visits blocks in random order and shuffles records within each window of Mix blocks.
	Full Mode = iota
	// Blocks visits blocks in random order and keeps records in stored order ("weak shuffle").
	Blocks
	// None keeps the stored order.
	None
)

var modeNames = [...]string{Full: "full", Blocks: "blocks", None: "none"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "full", "blocks" or "none".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown shuffle mode %q (want %s)", s, strings.Join(modeNames[:], ", "))
}

// MaxMix bounds Options.Mix; a window's permutation must also fit in uint32 indices.
const MaxMix = 1 << 16

// Options select an epoch's order. The zero value is epoch 0 of seed 0 in Full mode with Mix 1.
type Options struct {
	Seed  uint64 // default 0
	Epoch uint64 // default 0
	Mode  Mode   // default Full
	Mix   int    // blocks per window in Full mode; 0 means 1
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.Mix < 0 || o.Mix > MaxMix {
		return fmt.Errorf("mix %d is out of range (1 to %d)", o.Mix, MaxMix)
	}
	if o.Mode != Full && o.Mix > 1 {
		return fmt.Errorf("mix %d needs shuffle mode full (mode is %s)", o.Mix, o.Mode)
	}
	if o.Mode < Full || o.Mode > None {
		return fmt.Errorf("unknown shuffle mode %d", int(o.Mode))
	}
	return nil
}

func (o Options) mix() int {
	if o.Mode != Full || o.Mix < 1 {
		return 1
	}
	return o.Mix
}

// Order maps positions of an epoch to records. Positions are cut into windows of Mix
// consecutive blocks of the epoch's block order; a window's records are permuted together
// (Full) or kept in stored order (Blocks, None).
//
// An Order holds O(blocks) state plus a few cached window permutations. It is safe for
// concurrent use; everything but the window cache is immutable after New.
type Order struct {
	opt        Options
	counts     []uint64 // records per stored block
	blockOrder []uint32 // blockOrder[k] = stored index of the k-th block of the epoch
	winStart   []uint64 // winStart[w] = position of window w's first record; len windows+1
	mix        int

	windows *lru.Cache[int, *Window] // recently used windows, cost = records
}

// An Order keeps recently used windows while they hold at most windowCacheRecords records
// (4 bytes each), and always the last minWindowsCached, so that readers at a few places in
// the epoch do not recompute permutations on every read.
const (
	windowCacheRecords = 1 << 20
	minWindowsCached   = 4
)

// New builds the order of one epoch over blocks with the given record counts.
func New(counts []uint64, opt Options) (*Order, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	nb := len(counts)
	if nb == 0 || nb > math.MaxUint32 {
		return nil, fmt.Errorf("cannot order %d blocks", nb)
	}
	o := &Order{opt: opt, counts: counts, mix: opt.mix(),
		windows: lru.New[int, *Window](windowCacheRecords, minWindowsCached)}
	if opt.Mode == None {
		o.blockOrder = make([]uint32, nb)
		for i := range o.blockOrder {
			o.blockOrder[i] = uint32(i)
		}
	} else {
		o.blockOrder = Permutation(nb, NewRNG(Derive(opt.Seed, DomainBlockOrder, opt.Epoch, 0)))
	}
	nw := (nb + o.mix - 1) / o.mix
	o.winStart = make([]uint64, nw+1)
	for w := 0; w < nw; w++ {
		var n uint64
		for _, b := range o.windowBlocks(w) {
			n += counts[b]
		}
		if o.opt.Mode == Full && n > math.MaxUint32 {
			return nil, fmt.Errorf("window %d holds %d records, more than 2^32-1; lower the mix", w, n)
		}
		o.winStart[w+1] = o.winStart[w] + n
	}
	return o, nil
}

// Options returns the options the order was built with.
func (o *Order) Options() Options { return o.opt }

// Len returns the number of positions (records) in the epoch.
func (o *Order) Len() uint64 { return o.winStart[len(o.winStart)-1] }

// Windows returns the number of windows.
func (o *Order) Windows() int { return len(o.winStart) - 1 }

// WindowStart returns the position of window w's first record (w may equal Windows()).
func (o *Order) WindowStart(w int) uint64 { return o.winStart[w] }

// WindowBlocks returns the stored indices of window w's blocks, in epoch order, without
// computing the window's permutation. The slice is shared: do not modify it.
func (o *Order) WindowBlocks(w int) []uint32 { return o.windowBlocks(w) }

// windowBlocks returns the stored indices of window w's blocks, in epoch order.
func (o *Order) windowBlocks(w int) []uint32 {
	lo := w * o.mix
	hi := min(lo+o.mix, len(o.blockOrder))
	return o.blockOrder[lo:hi]
}

// WindowOf returns the window holding position pos (pos < Len()).
func (o *Order) WindowOf(pos uint64) int {
	return sort.Search(o.Windows(), func(w int) bool { return o.winStart[w+1] > pos })
}

// At returns the stored block and the index within it of the record at position pos.
func (o *Order) At(pos uint64) (block int, local uint64) {
	w := o.Window(o.WindowOf(pos))
	return w.At(pos - w.Start)
}

// Window returns window w, computing its permutation if it is not cached.
func (o *Order) Window(w int) *Window {
	if win, ok := o.windows.Get(w); ok {
		return win
	}
	win := o.buildWindow(w)
	o.windows.Add(w, win, win.Count)
	return win
}

func (o *Order) buildWindow(w int) *Window {
	blocks := o.windowBlocks(w)
	win := &Window{
		Index:  w,
		Start:  o.winStart[w],
		Count:  o.winStart[w+1] - o.winStart[w],
		Blocks: make([]int, len(blocks)),
		prefix: make([]uint64, len(blocks)+1),
	}
	for i, b := range blocks {
		win.Blocks[i] = int(b)
		win.prefix[i+1] = win.prefix[i] + o.counts[b]
	}
	if o.opt.Mode == Full {
		win.perm = Permutation(int(win.Count), NewRNG(Derive(o.opt.Seed, DomainWindow, o.opt.Epoch, uint64(w))))
	}
	return win
}

// Window is a run of consecutive blocks of the epoch's block order whose records are
// permuted together. Immutable.
type Window struct {
	Index  int      // window number in the epoch
	Start  uint64   // position of its first record in the epoch
	Count  uint64   // records in the window
	Blocks []int    // stored block indices, in epoch order
	prefix []uint64 // prefix[i] = records in Blocks[:i]
	perm   []uint32 // nil when records keep their stored order
}

// At returns the stored block and index within it of the window's i-th record (i < Count).
func (w *Window) At(i uint64) (block int, local uint64) {
	k, local := w.Locate(i)
	return w.Blocks[k], local
}

// Locate returns which of the window's blocks (an index into Blocks) holds its i-th record
// (i < Count), and the record's index within that block.
func (w *Window) Locate(i uint64) (k int, local uint64) {
	if w.perm != nil {
		i = uint64(w.perm[i])
	}
	if len(w.Blocks) > 1 {
		k = sort.Search(len(w.Blocks), func(k int) bool { return w.prefix[k+1] > i })
	}
	return k, i - w.prefix[k]
}
