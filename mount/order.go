package mount

import (
	"fmt"
	"math"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// The automatic order (--mix auto, the default; docs/SHUFFLE.md "The defaults"). Data that pack
// pre-shuffled is random inside every block, so windows of one block already give batches as
// varied as a uniform shuffle's. Data stored in order (a file served in place, windows over a
// time series, a pack made with --no-shuffle) is not: a batch drawn from one block is a few
// neighbouring records. Its windows therefore span AutoWindowBytes of blocks (in-place blocks
// are 1 MiB, layout.AutoBlockSize), the whole data when it is smaller: a batch of 256 then
// draws from about 200 places spread over the data, against about 250 for a uniform shuffle,
// and a dataset of up to 512 MiB is shuffled as uniformly as by a full permutation. The choice
// depends on the data alone, so every node and every remount gets the same order, unless the
// memory cannot hold the window (then the mount says so and info.json records it).

// AutoWindowBytes is the data a window of the automatic --mix spans over data stored in order.
const AutoWindowBytes = 512 << 20

// autoWindowRecords bounds the records of an automatic window where its order state grows
// with them: in order version 1, whose permutation takes 4 bytes a record (16 MiB, what 16 MiB
// blocks of 4-byte records took before), and for records of variable length in any version
// (a window's byte layout takes 16 bytes a record). Version 2 permutes the larger windows of
// fixed-size records in constant state (shuffle.Bijection), so only the memory for the data
// and AutoWindowBytes bound them.
const autoWindowRecords = 1 << 22

// QualityBatch is the batch size of the order's quality estimate and warning.
const QualityBatch = 256

// qualityFloor is the spread, relative to a uniform shuffle's, under which mount warns.
const qualityFloor = 0.7

// OrderChoice is the epoch order a mount serves and why: info.json's "order".
type OrderChoice struct {
	Mix     int    `json:"mix"`
	Auto    bool   `json:"auto"`     // Mix was chosen (--mix auto), not given
	InOrder bool   `json:"in_order"` // the records are stored in order (not pre-shuffled)
	Why     string `json:"why"`
	// Versions are the order versions that give this order (shuffle.Options.Version): both
	// where no window is permuted differently and the automatic window is the same.
	Versions []int `json:"versions"`
	// Spread is about how many different places (1 MiB stretches of the stored data, or
	// records where larger) a batch of QualityBatch draws from; Uniform is the same for a
	// uniform shuffle. Estimates from the block sizes, for the warning and for info.json:
	// blockfs order --stats measures the real order.
	Batch   int     `json:"batch"`
	Spread  float64 `json:"spread"`
	Uniform float64 `json:"uniform_spread"`
	Warning string  `json:"warning,omitempty"`
}

// ChooseOrder resolves opt.Mix 0 (auto) for ds and estimates the order's quality.
func ChooseOrder(ds *layout.Dataset, opt shuffle.Options) (shuffle.Options, OrderChoice) {
	ch := OrderChoice{Auto: opt.Mix == 0, InOrder: !ds.Manifest.PreShuffle.Shuffled, Batch: QualityBatch}
	nb := ds.Blocks()
	avg := max(1, storedBytes(ds)/int64(max(1, nb)))
	switch {
	case !ch.Auto:
		ch.Why = flag("mix") + " given"
	case opt.Mode != shuffle.Full:
		opt.Mix, ch.Why = 1, fmt.Sprintf(flag("shuffle")+" %s has no windows", opt.Mode)
	case !ch.InOrder:
		opt.Mix, ch.Why = 1, "pack pre-shuffled the records: a window of one block is as varied as a uniform shuffle"
	default:
		k := int64(autoMix(ds, opt.OrderVersion()))
		opt.Mix = int(k)
		if k == int64(nb) {
			ch.Why = fmt.Sprintf("stored in order: one window of all %d blocks (%s), shuffled as a whole", nb, ibytes(storedBytes(ds)))
		} else {
			ch.Why = fmt.Sprintf("stored in order: windows of %d blocks of about %s (%s of %s)", k, ibytes(avg), ibytes(k*avg), ibytes(storedBytes(ds)))
		}
	}
	ch.Mix = max(1, opt.Mix)
	ch.estimate(ds, opt)
	ch.Versions = ch.versions(ds, opt, false)
	return opt, ch
}

// autoMix returns the automatic window, in blocks, of data stored in order, in order version v.
func autoMix(ds *layout.Dataset, v int) int {
	nb := int64(max(1, ds.Blocks()))
	avg := max(1, storedBytes(ds)/nb)
	k := min(nb, max(1, AutoWindowBytes/avg), shuffle.MaxMix)
	if v < shuffle.Version2 || ds.RecordSize() == 0 {
		k = min(k, int64(recordBoundMix(ds)))
	}
	return int(k)
}

// recordBoundMix returns the blocks of ds an automatic window takes where it holds at most
// autoWindowRecords records.
func recordBoundMix(ds *layout.Dataset) int {
	nb := int64(max(1, ds.Blocks()))
	return int(max(1, autoWindowRecords/max(1, int64(ds.Records())/nb)))
}

// versions returns the order versions that give the order opt over ds: the other version
// too where its automatic window (when the window is automatic and not lowered) is the same
// and no window holds more than shuffle.BijectionFrom records.
func (ch *OrderChoice) versions(ds *layout.Dataset, opt shuffle.Options, lowered bool) []int {
	v := opt.OrderVersion()
	other := shuffle.Version1 + shuffle.Version2 - v
	sameMix := !ch.Auto || !ch.InOrder || (!lowered && autoMix(ds, other) == ch.Mix)
	same := opt.Mode != shuffle.Full || (sameMix && shuffle.MaxWindowRecords(ds.BlockCounts(), opt) <= shuffle.BijectionFrom)
	if !same {
		return []int{v}
	}
	return []int{shuffle.Version1, shuffle.Version2}
}

// lower shrinks an automatic window to k blocks to fit the memory, saying so.
func (ch *OrderChoice) lower(ds *layout.Dataset, opt *shuffle.Options, k int, why string) {
	opt.Mix, ch.Mix = k, k
	ch.Why += fmt.Sprintf("; lowered to %d blocks: %s (give "+flag("mix")+" to have the same order on every node)", k, why)
	ch.estimate(ds, *opt)
	ch.Versions = ch.versions(ds, *opt, true)
}

// estimate sets Spread, Uniform and, for an order far from uniform, Warning.
func (ch *OrderChoice) estimate(ds *layout.Dataset, opt shuffle.Options) {
	size := float64(storedBytes(ds))
	rec := size / float64(max(1, ds.Records()))
	place := max(float64(layout.AutoBlockMin), rec)
	nb := max(1, ds.Blocks())
	ch.Uniform = distinct(size/place, QualityBatch)
	switch {
	case !ch.InOrder:
		ch.Spread = ch.Uniform
	case opt.Mode == shuffle.Full:
		window := min(size, float64(ch.Mix)*size/float64(nb))
		ch.Spread = distinct(window/place, QualityBatch)
	default:
		ch.Spread = min(ch.Uniform, 1+QualityBatch*rec/place)
	}
	ch.Warning = ""
	if ch.Spread < qualityFloor*ch.Uniform {
		fix := "leave out " + flag("mix") + " and " + flag("block-size") + " for the automatic choice, or raise " + flag("mix")
		if ch.Auto {
			fix = ch.autoFix(ds, opt)
		}
		ch.Warning = fmt.Sprintf("the order is far from uniform: the data is stored in order, and a batch of %d draws from about %.0f places in it (1 MiB stretches), a uniform shuffle from about %.0f; %s",
			QualityBatch, ch.Spread, ch.Uniform, fix)
	}
}

// autoFix says what holds an automatic window down, and what to do.
func (ch *OrderChoice) autoFix(ds *layout.Dataset, opt shuffle.Options) string {
	switch {
	case opt.OrderVersion() < shuffle.Version2 && autoMix(ds, shuffle.Version2) > ch.Mix:
		return "the automatic window is held down by its order state in order version 1 (4 bytes a record); leave out " + flag("order-version") + " for version 2, which has none"
	case ds.RecordSize() == 0 && autoMix(ds, opt.OrderVersion()) == ch.Mix:
		return "the automatic window of records of variable length is held down by its byte layout (16 bytes a record, 2^22 records); give " + flag("mix") + " to widen it where the memory allows"
	}
	return "the automatic window is held down by the memory; give more with " + flag("cache-size") + ", or give " + flag("mix")
}

// storedBytes returns the bytes of stored data an epoch reads: the epoch's bytes, or for
// windows, which overlap, the rows they advance by (each row read once).
func storedBytes(ds *layout.Dataset) int64 {
	if length, stride, rowBytes, _, ok := ds.Window(); ok {
		return int64(ds.Records()) * min(stride, length) * rowBytes
	}
	return int64(ds.Bytes())
}

// distinct is the expected number of different places among b draws from m equally likely
// ones (at least 1 place).
func distinct(m float64, b int) float64 {
	m = max(1, m)
	return m * (1 - math.Pow(1-1/m, float64(b)))
}
