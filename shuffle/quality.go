package shuffle

import (
	"math"
)

// BatchQuality describes batches of Size consecutive records of an epoch.
type BatchQuality struct {
	Size           int
	DistinctBlocks float64 // mean number of distinct blocks a batch draws from
	LabelTV        float64 // mean total-variation distance of a batch's labels from the dataset's; NaN without labels
}

// Quality are the order-quality figures of one epoch (see docs/SHUFFLE.md).
type Quality struct {
	Batches []BatchQuality
	// IDGapEntropy and BlockGapEntropy are the Shannon entropies (bits) of the differences
	// between consecutive record ids and between consecutive block ids, divided by the same
	// entropy for a uniform permutation of the same records: 1 is as random as a uniform
	// shuffle, 0 is a fixed stride.
	IDGapEntropy, BlockGapEntropy float64
	// EpochCorrelation is the Pearson correlation of each record's position in this epoch and
	// the next: about 0 for independent shuffles, 1 when the order repeats.
	EpochCorrelation float64
}

// Sample is an epoch order as the quality figures need it: for each position, the record's
// id and storage block. Pos, when set, are the positions (a sample of stretches of a large
// epoch, Stretches); nil means IDs[i] is at position i of the range measured.
type Sample struct {
	IDs    []uint64
	Blocks []uint32
	Pos    []uint64
}

// Position returns the position of the sample's i-th record.
func (s Sample) Position(i int) uint64 {
	if s.Pos != nil {
		return s.Pos[i]
	}
	return uint64(i)
}

// The sample of a large epoch's quality figures: ranges of up to StatsExact positions are
// measured whole; larger ones over statsStretches stretches of statsStretch consecutive
// positions spread evenly over them (2^21 positions: their samples take a few hundred MiB
// whatever the records, where a whole epoch of 10^9 records would take tens of GiB).
const (
	StatsExact     = 1 << 23
	statsStretch   = 1 << 15 // a multiple of every batch size measured
	statsStretches = 64
)

// Stretches returns the positions of [lo, hi) that the quality figures measure, as ranges
// [a, b): the whole range when it holds at most StatsExact positions, else statsStretches
// stretches of statsStretch positions starting at multiples of statsStretch from lo, spread
// evenly from its start to its end.
func Stretches(lo, hi uint64) [][2]uint64 {
	if hi-lo <= StatsExact {
		return [][2]uint64{{lo, hi}}
	}
	slots := (hi - lo) / statsStretch // whole stretches in the range
	out := make([][2]uint64, 0, statsStretches)
	for j := uint64(0); j < statsStretches; j++ {
		a := lo + j*(slots-1)/(statsStretches-1)*statsStretch
		out = append(out, [2]uint64{a, a + statsStretch})
	}
	return out
}

// Measure computes the quality of epoch cur, with next (the following epoch of the same
// configuration) for the correlation and uniform (a uniform shuffle of the same records) as the
// entropy reference. labels, indexed by record id, may be nil.
func Measure(cur, next, uniform Sample, labels []int32, batchSizes []int) Quality {
	q := Quality{
		IDGapEntropy:     normalized(gapEntropy(cur.IDs), gapEntropy(uniform.IDs)),
		BlockGapEntropy:  normalized(gapEntropy32(cur.Blocks), gapEntropy32(uniform.Blocks)),
		EpochCorrelation: positionCorrelation(cur, next),
	}
	var dist map[int32]float64
	if labels != nil {
		dist = labelDist(cur.IDs, labels)
	}
	for _, b := range batchSizes {
		q.Batches = append(q.Batches, batchQuality(cur, labels, dist, b))
	}
	return q
}

func normalized(h, ref float64) float64 {
	if ref == 0 {
		return math.NaN()
	}
	return h / ref
}

func batchQuality(s Sample, labels []int32, dist map[int32]float64, size int) BatchQuality {
	bq := BatchQuality{Size: size, LabelTV: math.NaN()}
	blocks, tv := batchSeries(s, labels, dist, size)
	if len(blocks) == 0 {
		bq.DistinctBlocks = math.NaN()
		return bq
	}
	bq.DistinctBlocks = mean(blocks)
	if labels != nil {
		bq.LabelTV = mean(tv)
	}
	return bq
}

// BatchSeries returns, for each whole batch of size consecutive records of s, the number of
// distinct blocks it draws from and, with labels (by record id), the total-variation distance
// of its labels from those of all of s (nil without labels): the figures order --stats
// averages, batch by batch (order --stats --plot).
func BatchSeries(s Sample, labels []int32, size int) (blocks, labelTV []float64) {
	var dist map[int32]float64
	if labels != nil {
		dist = labelDist(s.IDs, labels)
	}
	return batchSeries(s, labels, dist, size)
}

func batchSeries(s Sample, labels []int32, dist map[int32]float64, size int) (blocks, tv []float64) {
	n := len(s.IDs) / size
	seen := map[uint32]struct{}{}
	count := map[int32]float64{}
	for k := 0; k < n; k++ {
		clear(seen)
		clear(count)
		for i := k * size; i < (k+1)*size; i++ {
			seen[s.Blocks[i]] = struct{}{}
			if labels != nil {
				count[labels[s.IDs[i]]]++
			}
		}
		blocks = append(blocks, float64(len(seen)))
		if labels != nil {
			var d float64
			for c, p := range dist {
				d += math.Abs(count[c]/float64(size) - p)
			}
			tv = append(tv, d/2)
		}
	}
	return blocks, tv
}

func mean(v []float64) float64 {
	var t float64
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

func labelDist(ids []uint64, labels []int32) map[int32]float64 {
	d := map[int32]float64{}
	for _, id := range ids {
		d[labels[id]]++
	}
	for c := range d {
		d[c] /= float64(len(ids))
	}
	return d
}

func gapEntropy(ids []uint64) float64 {
	h := map[int64]float64{}
	for i := 1; i < len(ids); i++ {
		h[int64(ids[i]-ids[i-1])]++
	}
	return entropy(h, len(ids)-1)
}

func gapEntropy32(b []uint32) float64 {
	h := map[int64]float64{}
	for i := 1; i < len(b); i++ {
		h[int64(b[i])-int64(b[i-1])]++
	}
	return entropy(h, len(b)-1)
}

func entropy(h map[int64]float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	var e float64
	for _, c := range h {
		p := c / float64(n)
		e -= p * math.Log2(p)
	}
	return e
}

// positionCorrelation is the Pearson correlation between the position (Sample.Position) of
// each id in sa and in sb, over the ids in both (a shard's ids in one epoch and the next are
// different sets, as are two samples of a large epoch: only those in both count); NaN for
// fewer than two.
func positionCorrelation(sa, sb Sample) float64 {
	a, b := sa.IDs, sb.IDs
	if len(a) < 2 || len(b) < 2 {
		return math.NaN()
	}
	var posOf func(id uint64) (int, bool)
	if m := maxID(b); m < uint64(4*len(b)) {
		dense := make([]int32, m+1)
		for i := range dense {
			dense[i] = -1
		}
		for i, id := range b {
			dense[id] = int32(i)
		}
		posOf = func(id uint64) (int, bool) {
			if id > m || dense[id] < 0 {
				return 0, false
			}
			return int(dense[id]), true
		}
	} else {
		posB := make(map[uint64]int, len(b))
		for i, id := range b {
			posB[id] = i
		}
		posOf = func(id uint64) (int, bool) { p, ok := posB[id]; return p, ok }
	}
	var xs, ys []uint64
	for i, id := range a {
		if p, ok := posOf(id); ok {
			xs, ys = append(xs, sa.Position(i)), append(ys, sb.Position(p))
		}
	}
	if len(xs) < 2 {
		return math.NaN()
	}
	return pearson(len(xs), func(i int) (float64, float64) { return float64(xs[i]), float64(ys[i]) })
}

func maxID(ids []uint64) uint64 {
	var m uint64
	for _, id := range ids {
		m = max(m, id)
	}
	return m
}

func pearson(n int, xy func(i int) (float64, float64)) float64 {
	var sx, sy, sxx, syy, sxy float64
	for i := 0; i < n; i++ {
		x, y := xy(i)
		sx += x
		sy += y
		sxx += x * x
		syy += y * y
		sxy += x * y
	}
	fn := float64(n)
	cov := sxy - sx*sy/fn
	vx := sxx - sx*sx/fn
	vy := syy - sy*sy/fn
	if vx == 0 || vy == 0 {
		return math.NaN()
	}
	return cov / math.Sqrt(vx*vy)
}

// UniformAt returns a uniform shuffle of n records, as a keyed bijection of their storage
// indices computed per position: the reference row of a large epoch, whose Fisher-Yates
// permutation (UniformSample) would take 4 bytes a record.
func UniformAt(n, seed uint64) func(pos uint64) (storage uint64) {
	return NewBijection(n, Derive(seed, DomainReference, 0, 1)).At
}

// UniformSample returns a uniform shuffle of n records with the given storage blocks and ids
// (by storage index): the reference row.
func UniformSample(blockOf func(storage uint64) uint32, idOf func(storage uint64) uint64, n uint64, seed uint64) Sample {
	perm := Permutation(int(n), NewRNG(Derive(seed, DomainReference, 0, 0)))
	s := Sample{IDs: make([]uint64, n), Blocks: make([]uint32, n)}
	for i, st := range perm {
		s.IDs[i] = idOf(uint64(st))
		s.Blocks[i] = blockOf(uint64(st))
	}
	return s
}
