package main

import (
	"fmt"
	"math"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/shuffle"
)

// statsSamples are the orders order --stats compares, at the positions it measures: the epoch,
// the next one (for the correlation) and two uniform shuffles of the same records (the
// reference row, and its own next epoch).
type statsSamples struct {
	cur, next, uni, uni2 shuffle.Sample
	sampled              string // how a large epoch was sampled; "" when measured whole
}

// epochOrder returns epoch e of ds in order opt.
func epochOrder(ds *layout.Dataset, opt shuffle.Options, e uint64) (*shuffle.Order, error) {
	opt.Epoch = e
	return shuffle.New(ds.BlockCounts(), opt)
}

// referenceSeeds returns the seeds of the uniform shuffles order --stats compares with: the
// reference row's, and its next epoch's (docs/SHUFFLE.md).
func referenceSeeds(opt shuffle.Options) (ref, next uint64) {
	return opt.Seed ^ opt.Epoch, opt.Seed ^ opt.Epoch ^ 0x5bd1e995
}

// exactSamples measures positions [lo, hi) whole, with Fisher-Yates uniform shuffles of all
// the records: a dataset of at most shuffle.StatsExact records.
func exactSamples(ds *layout.Dataset, opt shuffle.Options, lo, hi uint64) (statsSamples, error) {
	var s statsSamples
	ids, err := mount.StoredIDs(ds) // source id by storage index
	if err != nil {
		return s, err
	}
	epoch := func(e uint64) (shuffle.Sample, error) {
		ord, err := epochOrder(ds, opt, e)
		if err != nil {
			return shuffle.Sample{}, err
		}
		smp := shuffle.Sample{IDs: make([]uint64, 0, hi-lo), Blocks: make([]uint32, 0, hi-lo)}
		for pos := lo; pos < hi; pos++ {
			b, l := ord.At(pos)
			smp.IDs = append(smp.IDs, ids[ds.FirstRecord(b)+l])
			smp.Blocks = append(smp.Blocks, uint32(b))
		}
		return smp, nil
	}
	if s.cur, err = epoch(opt.Epoch); err != nil {
		return s, err
	}
	if s.next, err = epoch(opt.Epoch + 1); err != nil {
		return s, err
	}
	blockOf := func(st uint64) uint32 { b, _ := ds.BlockOf(st); return uint32(b) }
	idOf := func(st uint64) uint64 { return ids[st] }
	n := hi - lo
	cut := func(s shuffle.Sample) shuffle.Sample { return shuffle.Sample{IDs: s.IDs[:n], Blocks: s.Blocks[:n]} }
	ref, refNext := referenceSeeds(opt)
	s.uni = cut(shuffle.UniformSample(blockOf, idOf, ds.Records(), ref))
	s.uni2 = cut(shuffle.UniformSample(blockOf, idOf, ds.Records(), refNext))
	return s, nil
}

// sampledSamples measures a large dataset's epoch over shuffle.Stretches of [lo, hi), with
// uniform shuffles computed per position (shuffle.UniformAt): memory bounded by the sample,
// not by the records.
func sampledSamples(ds *layout.Dataset, opt shuffle.Options, lo, hi uint64) (statsSamples, error) {
	var s statsSamples
	var pos []uint64
	stretches := shuffle.Stretches(lo, hi)
	for _, st := range stretches {
		for p := st[0]; p < st[1]; p++ {
			pos = append(pos, p)
		}
	}
	if n := hi - lo; uint64(len(pos)) < n {
		s.sampled = fmt.Sprintf("measured over %d stretches of %d positions spread over the epoch (%d of %d)",
			len(stretches), len(pos)/len(stretches), len(pos), n)
	}
	// The four samples' storage indices, then their ids, resolved together: each block's ids
	// read once.
	n := len(pos)
	ids, blocks := make([]uint64, 4*n), make([]uint32, 4*n)
	at := func(k int, storage func(p uint64) uint64) shuffle.Sample {
		smp := shuffle.Sample{IDs: ids[k*n : (k+1)*n], Blocks: blocks[k*n : (k+1)*n], Pos: pos}
		for i, p := range pos {
			smp.IDs[i] = storage(p)
		}
		return smp
	}
	var ords [2]*shuffle.Order
	for k := range ords {
		var err error
		if ords[k], err = epochOrder(ds, opt, opt.Epoch+uint64(k)); err != nil {
			return s, err
		}
	}
	stored := func(o *shuffle.Order) func(uint64) uint64 {
		return func(p uint64) uint64 { b, l := o.At(p); return ds.FirstRecord(b) + l }
	}
	s.cur, s.next = at(0, stored(ords[0])), at(1, stored(ords[1]))
	ref, refNext := referenceSeeds(opt)
	s.uni = at(2, shuffle.UniformAt(ds.Records(), ref))
	s.uni2 = at(3, shuffle.UniformAt(ds.Records(), refNext))
	return s, mount.ResolveIDs(ds, ids, blocks)
}

func printStats(name string, ds *layout.Dataset, opt shuffle.Options, lo, hi uint64, f orderFlags) error {
	var labels []int32
	var err error
	if f.labels != "" {
		if labels, err = readLabels(f.labels, ds.Records()); err != nil {
			return err
		}
	}
	measure := sampledSamples
	if ds.Records() <= shuffle.StatsExact {
		measure = exactSamples
	}
	s, err := measure(ds, opt, lo, hi)
	if err != nil {
		return err
	}
	sizes := []int{32, 256, 1024}
	q := shuffle.Measure(s.cur, s.next, s.uni, labels, sizes)
	ref := shuffle.Measure(s.uni, s.uni2, s.uni, labels, sizes)

	desc := fmt.Sprintf("seed %d, epoch %d, shuffle %s, mix %d, order version %d", opt.Seed, opt.Epoch, opt.Mode, max(1, opt.Mix), opt.OrderVersion())
	if f.shard != "" {
		desc += ", shard " + f.shard
	}
	fmt.Printf("%s: %d records in %d blocks; %s\n", name, hi-lo, ds.Blocks(), desc)
	if s.sampled != "" {
		fmt.Printf("%s\n", s.sampled)
	}
	fmt.Printf("%-40s %12s %16s\n", "", "this order", "uniform shuffle")
	row := func(name string, a, b float64, format string) {
		fmt.Printf("%-40s %12s %16s\n", name, fmtNum(a, format), fmtNum(b, format))
	}
	for i, b := range q.Batches {
		row(fmt.Sprintf("distinct blocks per batch of %d", b.Size), b.DistinctBlocks, ref.Batches[i].DistinctBlocks, "%.1f")
	}
	if labels != nil {
		for i, b := range q.Batches {
			row(fmt.Sprintf("label TV distance, batch of %d", b.Size), b.LabelTV, ref.Batches[i].LabelTV, "%.3f")
		}
	}
	row("record id gap entropy (uniform = 1)", q.IDGapEntropy, ref.IDGapEntropy, "%.3f")
	row("block id gap entropy (uniform = 1)", q.BlockGapEntropy, ref.BlockGapEntropy, "%.3f")
	row("position correlation with next epoch", q.EpochCorrelation, ref.EpochCorrelation, "%.3f")
	if f.plot != "" {
		if err := plotOrder(f.plot, fmt.Sprintf("distinct blocks per batch: %s", desc), s.cur, s.next, s.uni, s.uni2, labels); err != nil {
			return err
		}
		fmt.Printf("plot: %s\n", f.plot)
	}
	return nil
}

func fmtNum(v float64, format string) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}
