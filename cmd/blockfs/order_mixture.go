package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/blockfs/blockfs/pack"

	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/spf13/pflag"
)

// runOrderMixture is blockfs order over a mixture file: --ids prints each record's source and
// id, --stats how evenly batches hold each source's share, then each source's own order.
// pinned, when given (a mixture's mount point), are the sources' orders as the mount serves them.
func runOrderMixture(fl *pflag.FlagSet, f orderFlags, data string, pinned []sourceOrder) error {
	if f.labels != "" {
		return usagef("--labels: %s is a mixture, whose records' ids are their sources'; run order --stats --labels on a source", data)
	}
	spec, err := mixtureOptions(fl, data, "")
	if err != nil {
		return err
	}
	if pinned != nil {
		if len(pinned) != len(spec.Sources) {
			return fmt.Errorf("%s has %d sources, its mount %d: the file changed since it was mounted", data, len(spec.Sources), len(pinned))
		}
		for i, so := range pinned {
			if spec.Sources[i].Opt.Order, err = orderOptions(so.Seed, 0, so.Shuffle, strconv.Itoa(max(1, so.Mix)), orderVersion(so.OrderVersion)); err != nil {
				return err
			}
			spec.Sources[i].SeedGiven = true
		}
	}
	d, err := mount.Open(mount.Options{Data: data, Order: shuffle.Options{Seed: f.seed}, Mixture: spec, Indexer: pack.IndexInPlace})
	if err != nil {
		return err
	}
	defer d.Close()
	n, err := d.Records(f.epoch)
	if err != nil {
		return err
	}
	var sh mount.Shard
	if f.shard != "" {
		var ok bool
		if sh, ok = parseShard(f.shard); !ok {
			return usagef("--shard %q is not R/W with 0 <= R < W", f.shard)
		}
	}
	srcs, err := d.Column(f.epoch, mount.Sources, sh)
	if err != nil {
		return err
	}
	if f.ids {
		ids, err := d.Column(f.epoch, mount.IDs, sh)
		if err != nil {
			return err
		}
		return printSourceIDs(srcs, ids)
	}
	col, err := io.ReadAll(srcs)
	if err != nil {
		return err
	}
	return printMixtureStats(d, spec, f, col, n)
}

// printSourceIDs prints "SOURCE ID" per record from a .source and an .ids stream.
func printSourceIDs(srcs, ids io.Reader) error {
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	s, in := bufio.NewReaderSize(srcs, 1<<16), bufio.NewReaderSize(ids, 1<<20)
	var b [8]byte
	var sb [2]byte
	for {
		if _, err := io.ReadFull(s, sb[:]); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		if _, err := io.ReadFull(in, b[:]); err != nil {
			return err
		}
		w.WriteString(strconv.FormatUint(uint64(binary.LittleEndian.Uint16(sb[:])), 10))
		w.WriteByte(' ')
		w.WriteString(strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 10))
		w.WriteByte('\n')
	}
	return w.Flush()
}

// printMixtureStats prints each source's share of the epoch, how far batches of consecutive
// records stray from those shares (against a uniform shuffle of the same records), then each
// source's own order figures (printStats).
func printMixtureStats(d *mount.Data, spec *mount.Mixture, f orderFlags, srcs []byte, records uint64) error {
	order, _, err := d.Mixture()
	if err != nil {
		return err
	}
	ns := order.Sources()
	col := make([]uint16, len(srcs)/2)
	for k := range col {
		col[k] = binary.LittleEndian.Uint16(srcs[2*k:])
	}
	me, err := order.Epoch(f.epoch)
	if err != nil {
		return err
	}
	share := make([]float64, ns)
	for i := range share {
		share[i] = float64(me.Count(i)) / float64(max(1, records))
	}
	uni := slices.Clone(col)
	rng := shuffle.NewRNG(shuffle.Derive(f.seed, shuffle.DomainReference, f.epoch, 0))
	for k := len(uni) - 1; k > 0; k-- {
		j := rng.Below(uint64(k + 1))
		uni[k], uni[j] = uni[j], uni[k]
	}
	desc := fmt.Sprintf("seed %d, epoch %d", f.seed, f.epoch)
	if f.shard != "" {
		desc += ", shard " + f.shard
	}
	fmt.Printf("%s: %d records of %d sources; %s\n", spec.File, len(col), ns, desc)
	for i := range ns {
		fmt.Printf("  source %d (%s): %d records an epoch (%.2f%%; %s %s)\n", i, spec.Sources[i].Name, me.Count(i), 100*share[i], spec.Sources[i].Rule.Kind, spec.Sources[i].Rule.Text)
	}
	fmt.Printf("%-48s %12s %16s\n", "", "this order", "uniform shuffle")
	for _, b := range []int{32, 256, 1024} {
		a, ua := batchShareError(col, share, b), batchShareError(uni, share, b)
		fmt.Printf("%-48s %12.3f %16.3f\n", fmt.Sprintf("largest |count - share| in a batch of %d", b), a.worst, ua.worst)
		fmt.Printf("%-48s %12.3f %16.3f\n", fmt.Sprintf("mean |count - share| per source, batch of %d", b), a.mean, ua.mean)
	}
	if f.plot != "" {
		if err := plotMixture(f.plot, fmt.Sprintf("sources' shares per batch: %s", desc), shareSeries(col, share, plotBatch), shareSeries(uni, share, plotBatch)); err != nil {
			return err
		}
		fmt.Printf("plot: %s\n", f.plot)
	}
	for i := range ns {
		ds, opt := d.Source(i)
		opt.Epoch = me.DrawOf(i, 0).Pass
		fmt.Printf("\nsource %d (%s), its own order (pass %d):\n", i, spec.Sources[i].Name, opt.Epoch)
		if err := printStats(ds.Where(), ds, opt, 0, ds.Records(), orderFlags{}); err != nil {
			return err
		}
	}
	return nil
}

type shareError struct{ worst, mean float64 }

// batchShareError measures, over the whole batches of b consecutive records of col, how far a
// source's count strays from b times its share: the largest and the mean over sources and
// batches.
func batchShareError(col []uint16, share []float64, b int) shareError {
	var e shareError
	counts := make([]int, len(share))
	batches := 0
	for lo := 0; lo+b <= len(col); lo += b {
		clear(counts)
		for _, s := range col[lo : lo+b] {
			counts[s]++
		}
		for i, c := range counts {
			d := math.Abs(float64(c) - float64(b)*share[i])
			e.worst = max(e.worst, d)
			e.mean += d
		}
		batches++
	}
	if batches > 0 {
		e.mean /= float64(batches * len(share))
	}
	return e
}

// describeMixture prints what info says of a mixture: its epoch, then each source as info
// describes a dataset, with its rule and its records an epoch.
func describeMixture(fl *pflag.FlagSet, data string) error {
	spec, err := mixtureOptions(fl, data, "")
	if err != nil {
		return err
	}
	for _, src := range spec.Sources {
		if mount.IsRemote(src.Opt.Data) {
			return usagef("%s has a source in an object store (%s): mount the mixture and read its .blockfs/info.json", data, src.Opt.Data)
		}
	}
	d, err := mount.Open(mount.Options{Data: data, Mixture: spec, Indexer: pack.IndexInPlace})
	if err != nil {
		return err
	}
	defer d.Close()
	order, rs, err := d.Mixture()
	if err != nil {
		return err
	}
	me, err := order.Epoch(0)
	if err != nil {
		return err
	}
	kind := "records of several sizes (epochs have .offsets)"
	if rs > 0 {
		kind = "fixed-size, " + ibytes(uint64(rs)) + " each"
	}
	fmt.Printf("%-13s %s\n", "mixture:", spec.File)
	fmt.Printf("%-13s %d in epoch 0 from %d sources; %s", "records:", me.Len(), len(spec.Sources), kind)
	if order.Varies() {
		fmt.Print("; epochs differ in length (a fractional repeat)")
	}
	fmt.Println()
	for i, src := range spec.Sources {
		ds, _ := d.Source(i)
		fmt.Printf("\nsource %d (%s): %s %s, %d records an epoch (%.2f%%)\n", i, src.Name, src.Rule.Kind, src.Rule.Text, me.Count(i), 100*float64(me.Count(i))/float64(max(1, me.Len())))
		fmt.Print(describe(ds))
	}
	return nil
}

// plotBatch is the batch size of --plot's per-batch panels.
const plotBatch = 256

// shareSeries returns, for each batch of b consecutive records of col, the largest
// |count - share x b| over the sources: how far the batch strays from the mixture's shares.
func shareSeries(col []uint16, share []float64, b int) []float64 {
	var out []float64
	for lo := 0; lo+b <= len(col); lo += b {
		out = append(out, batchShareError(col[lo:lo+b], share, b).worst)
	}
	return out
}
