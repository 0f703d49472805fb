package shuffle

import (
	"fmt"
	"math"
	"sort"
	"strings"
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

// The order versions (docs/SHUFFLE.md, "Order versions"). Version 2 permutes a window of more
// than BijectionFrom records by a keyed bijection computed per position (Bijection), where
// version 1 held its whole permutation (4 bytes a record); smaller windows, and so most
// orders, are the same bytes in both.
const (
	Version1       = 1
	Version2       = 2
	CurrentVersion = Version2
)

// BijectionFrom is the largest window that version 2 still permutes as version 1 does.
const BijectionFrom = 1 << 22

// Options select an epoch's order. The zero value is epoch 0 of seed 0 in Full mode with Mix 1.
type Options struct {
	Seed  uint64 // default 0
	Epoch uint64 // default 0
	Mode  Mode   // default Full
	Mix   int    // blocks per window in Full mode; 0 means 1
	// Version is the order version (Version1, Version2); 0 means CurrentVersion.
	Version int
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
	if o.Version < 0 || o.Version > CurrentVersion {
		return fmt.Errorf("order version %d is not one of this blockfs (1 to %d)", o.Version, CurrentVersion)
	}
	return nil
}

// OrderVersion returns the order version the options select (0 is CurrentVersion).
func (o Options) OrderVersion() int {
	if o.Version == 0 {
		return CurrentVersion
	}
	return o.Version
}

// bijective reports whether a Full window of n records is permuted by a Bijection.
func (o Options) bijective(n uint64) bool {
	return o.OrderVersion() >= Version2 && n > BijectionFrom
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
// An Order holds O(blocks) state; the windows it computes are kept in a WindowCache, its own
// or one shared by the epochs of a mount. It is safe for concurrent use; everything but the
// window cache is immutable after New.
type Order struct {
	opt        Options
	counts     []uint64 // records per stored block
	blockOrder []uint32 // blockOrder[k] = stored index of the k-th block of the epoch
	winStart   []uint64 // winStart[w] = position of window w's first record; len windows+1; nil when even
	mix        int
	nw         int // windows

	// even: every block but the last holds per records, so window starts need no table (a
	// dataset of fixed-size records cut at a fixed block size, packed or in place). The last
	// block, short by short records, is in window lastWin.
	even         bool
	per, short   uint64
	lastWin, len uint64

	windows *WindowCache
}

// DefaultWindowBytes is the budget of the window cache of an Order made by New: 4 MiB of
// order state (a million records of a permuted window).
const DefaultWindowBytes = 4 << 20

// New builds the order of one epoch over blocks with the given record counts, with a window
// cache of its own (DefaultWindowBytes).
func New(counts []uint64, opt Options) (*Order, error) {
	return NewCached(counts, opt, NewWindowCache(DefaultWindowBytes))
}

// NewCached is New with the windows kept in wc, which Orders of the same counts and options
// but other epochs may share.
func NewCached(counts []uint64, opt Options, wc *WindowCache) (*Order, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	nb := len(counts)
	if nb == 0 || nb > math.MaxUint32 {
		return nil, fmt.Errorf("cannot order %d blocks", nb)
	}
	o := &Order{opt: opt, counts: counts, mix: opt.mix(), windows: wc}
	if opt.Mode == None {
		o.blockOrder = make([]uint32, nb)
		for i := range o.blockOrder {
			o.blockOrder[i] = uint32(i)
		}
	} else {
		o.blockOrder = Permutation(nb, NewRNG(Derive(opt.Seed, DomainBlockOrder, opt.Epoch, 0)))
	}
	nw := (nb + o.mix - 1) / o.mix
	o.nw = nw
	if o.evenBlocks() {
		if n := o.per * uint64(min(o.mix, nb)); o.opt.Mode == Full && !opt.bijective(n) && n > math.MaxUint32 {
			return nil, fmt.Errorf("window 0 holds %d records, more than 2^32-1; lower the mix", n)
		}
		return o, nil
	}
	o.winStart = make([]uint64, nw+1)
	for w := 0; w < nw; w++ {
		var n uint64
		for _, b := range o.windowBlocks(w) {
			n += counts[b]
		}
		if o.opt.Mode == Full && !opt.bijective(n) && n > math.MaxUint32 {
			return nil, fmt.Errorf("window %d holds %d records, more than 2^32-1; lower the mix", w, n)
		}
		o.winStart[w+1] = o.winStart[w] + n
	}
	return o, nil
}

// evenBlocks sets the even fields when every block but the last holds the same number of
// records (at least as many as the last), and reports whether it did.
func (o *Order) evenBlocks() bool {
	c := o.counts
	nb := len(c)
	per := c[0]
	if nb < 2 || per == 0 || c[nb-1] > per || per > math.MaxUint64/uint64(nb) {
		return false
	}
	for _, n := range c[:nb-1] {
		if n != per {
			return false
		}
	}
	o.even, o.per, o.short = true, per, per-c[nb-1]
	o.len = uint64(nb)*per - o.short
	for k, b := range o.blockOrder {
		if int(b) == nb-1 {
			o.lastWin = uint64(k / o.mix)
			break
		}
	}
	return true
}

// Options returns the options the order was built with.
func (o *Order) Options() Options { return o.opt }

// Len returns the number of positions (records) in the epoch.
func (o *Order) Len() uint64 { return o.WindowStart(o.nw) }

// Windows returns the number of windows.
func (o *Order) Windows() int { return o.nw }

// WindowStart returns the position of window w's first record (w may equal Windows()).
func (o *Order) WindowStart(w int) uint64 {
	if !o.even {
		return o.winStart[w]
	}
	if w == o.nw {
		return o.len
	}
	pos := uint64(w) * uint64(o.mix) * o.per
	if uint64(w) > o.lastWin {
		pos -= o.short
	}
	return pos
}

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
	return sort.Search(o.Windows(), func(w int) bool { return o.WindowStart(w+1) > pos })
}

// At returns the stored block and the index within it of the record at position pos.
func (o *Order) At(pos uint64) (block int, local uint64) {
	w := o.Window(o.WindowOf(pos))
	return w.At(pos - w.Start)
}

// Window returns window w, computing its permutation if it is not cached.
func (o *Order) Window(w int) *Window { return o.windows.get(o, w) }

func (o *Order) buildWindow(w int) *Window {
	blocks := o.windowBlocks(w)
	win := &Window{
		Index:  w,
		Start:  o.WindowStart(w),
		Count:  o.WindowStart(w+1) - o.WindowStart(w),
		Blocks: make([]int, len(blocks)),
		prefix: make([]uint64, len(blocks)+1),
	}
	for i, b := range blocks {
		win.Blocks[i] = int(b)
		win.prefix[i+1] = win.prefix[i] + o.counts[b]
	}
	if o.opt.Mode == Full {
		key := Derive(o.opt.Seed, DomainWindow, o.opt.Epoch, uint64(w))
		if o.opt.bijective(win.Count) {
			win.bij = NewBijection(win.Count, key)
		} else {
			win.perm = Permutation(int(win.Count), NewRNG(key))
		}
		win.buildBuckets()
	}
	return win
}
