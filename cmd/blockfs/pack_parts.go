package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/pack"
)

// runPackPart runs pack --part I/N INPUT... OUT (pack.PackPart).
func runPackPart(f packFlags, args []string, out string) error {
	p, err := pack.ParsePart(f.part)
	if err != nil {
		return usagef("%v", err)
	}
	inputs, err := pack.ExpandInputs(args)
	if err != nil {
		return usagef("%v", err)
	}
	format, err := pack.ParseFormat(f.format)
	if err != nil {
		return usagef("--format: %v", err)
	}
	if ff, ok := pack.DetectFields(inputs[0]); ok && format == pack.Auto {
		format = ff
	}
	opt, err := partOptions(f, format)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var res *pack.PartResult
	if mount.IsRemote(out) {
		so, derr := f.s3.decode()
		if derr != nil {
			return derr
		}
		res, err = pack.PackPartToStore(ctx, inputs, out, p, opt, so.S3)
		err = usageIfStore(err)
	} else {
		res, err = pack.PackPart(ctx, inputs, out, p, opt)
	}
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	pm := res.Manifest
	if res.Result == nil {
		what := "has no inputs"
		if res.Inputs > 0 {
			what = fmt.Sprintf("has %d %s holding no records", res.Inputs, plural(res.Inputs, "input", "inputs"))
		}
		fmt.Printf("part %d of %d %s (%d inputs in all): wrote an empty part %s/parts/%s.json\n", p.Index, p.Count, what, res.All, out, p.Name())
		return nil
	}
	m := res.Result.Manifest
	at := fmt.Sprintf("%s/parts/%s", out, p.Name())
	if len(pm.Fields) > 0 { // each field's blocks under its own folder
		at = fmt.Sprintf("%s/fields/{%s}/parts/%s", out, strings.Join(fieldNames(pm.Fields), ","), p.Name())
	}
	fmt.Printf("packed part %d of %d: %d records (%s) of %d of %d inputs into %d %s of %s at %s, in %.1fs (%s)\n",
		p.Index, p.Count, pm.Records, ibytes(m.Bytes), res.Inputs, res.All, len(m.Blocks), plural(len(m.Blocks), "block", "blocks"),
		ibytes(uint64(pm.Options.BlockSize)), at, secs, rate(m.Bytes, secs))
	return nil
}

// partOptions checks pack --part's flags for inputs of format and converts them to pack's
// options: plainOptions', or for an input with fields its block size and fields' options.
func partOptions(f packFlags, format pack.Format) (pack.Options, error) {
	if !format.HasFields() {
		return plainOptions(f, format)
	}
	if f.segmentsBy != "" {
		return pack.Options{}, usagef("--segments-by packs a table whole; it does not go with --part")
	}
	if f.recordSize != "" || f.skipHeader || f.noShuffle || len(f.include) > 0 || len(f.exclude) > 0 || f.allFiles {
		return pack.Options{}, usagef("--record-size, --skip-header, --no-shuffle, --include, --exclude and --all-files do not apply to --format %s (its samples keep their input order; the mount shuffles them)", format)
	}
	var bs int64
	if f.blockSize != "" {
		var err error
		if bs, err = parseSize("block-size", f.blockSize); err != nil {
			return pack.Options{}, err
		}
	}
	comp, err := f.compression()
	if err != nil {
		return pack.Options{}, err
	}
	return pack.Options{Format: format, BlockSize: bs, Seed: f.seed, Force: f.force, Compress: comp,
		Fields: pack.FieldOptions{Columns: f.columns, FillMissing: f.fillMissing}}, nil
}

// runPackMerge runs pack --merge OUT (pack.Merge).
func runPackMerge(f packFlags, out string) error {
	if f.format != "auto" || f.recordSize != "" || f.blockSize != "" || f.seed != 0 || f.noShuffle || f.skipHeader ||
		len(f.include)+len(f.exclude)+len(f.columns) > 0 || f.allFiles || f.fillMissing || f.segmentsBy != "" {
		return usagef("--merge takes the options of the parts from their manifests: give it only OUT, --force, --quiet and the object store's flags")
	}
	start := time.Now()
	var res *pack.MergeResult
	var err error
	if mount.IsRemote(out) {
		so, derr := f.s3.decode()
		if derr != nil {
			return derr
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, err = pack.MergeToStore(ctx, out, so.S3, f.force)
		err = usageIfStore(err)
	} else {
		res, err = pack.Merge(out, f.force)
	}
	if err != nil {
		return err
	}
	m := res.Manifest
	order := fmt.Sprintf("pre-shuffled with seed %d", m.PreShuffle.Seed)
	switch {
	case !m.PreShuffle.Shuffled && m.IDs:
		order = fmt.Sprintf("each part pre-shuffled with seed %d (the mount's automatic --mix mixes blocks across the parts)", m.PreShuffle.Seed)
	case !m.PreShuffle.Shuffled:
		order = "in input order"
	}
	fmt.Printf("merged %d parts (%d empty): %d records (%s) in %d blocks at %s, %s, in %.1fs\n",
		res.Parts, res.Empty, m.Records, ibytes(m.Bytes), len(m.Blocks), out, order, time.Since(start).Seconds())
	return nil
}

// fieldNames returns the names of fields.
func fieldNames(fields []layout.Field) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}
