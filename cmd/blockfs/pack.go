package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/pack"
)

type packFlags struct {
	format     string
	recordSize string
	blockSize  string
	seed       uint64
	noShuffle  bool
	force      bool
	quiet      bool
	s3         s3Flags // DST s3://BUCKET/PREFIX
}

func newPack() *cobra.Command {
	var f packFlags
	c := &cobra.Command{
		Use:   "pack [--format auto|raw|npy|lines|files] [flags] SRC DST",
		Short: "Pack input records into a block dataset",
		Long: `pack turns SRC into a dataset directory DST. Formats:

  raw    a flat file of fixed-size records (--record-size), as numpy's tofile or np.memmap write
  npy    a NumPy .npy file (1.0, 2.0, 3.0): one record per row along the first axis; dtype and
         the per-record shape are kept. C order only.
  lines  one variable-length record per line (JSON Lines, CSV rows, text); the record is the
         line without its '\n' (a '\r' before it is kept)
  files  a folder tree, one record per regular file, in sorted path order; the relative
         paths are kept (blockfs info --names, .blockfs/names.txt in the mount)
  auto   (default) a folder is files, the .npy magic is npy, .jsonl/.ndjson/.txt/.csv/.tsv
         are lines; any other file is raw if --record-size is given, else needs --format

By default records are assigned to blocks in a seeded random order (block shuffling is only as
good as this pre-shuffle), with bounded memory whatever the input size; --no-shuffle keeps
input order, so record i lands in block i / records-per-block.

DST is written in a temporary directory next to it and renamed at the end: an interrupted or
failed pack leaves nothing behind, and an existing DST is only replaced with --force.
DST may be s3://BUCKET/PREFIX: each block file is uploaded as soon as it is written and then
deleted locally ($TMPDIR holds a few blocks, and the pre-shuffle's spill), and the manifest
goes last, so the dataset appears whole or not at all.`,
		Args: exactArgs("SRC", "DST"),
		RunE: func(c *cobra.Command, args []string) error { return runPack(f, args[0], args[1]) },
	}
	fl := c.Flags()
	fl.StringVar(&f.format, "format", "auto", "input format: auto, raw, npy, lines, files")
	fl.StringVar(&f.recordSize, "record-size", "", "bytes per record (raw; checks npy rows), e.g. 4096 or 4KiB")
	fl.StringVar(&f.blockSize, "block-size", "", "target block file size (default: "+ibytes(layout.DefaultBlockSize)+", or less so that there are at least 64 blocks, down to "+ibytes(pack.MinAutoBlockSize)+")")
	fl.Uint64Var(&f.seed, "seed", 0, "pre-shuffle seed")
	fl.BoolVar(&f.noShuffle, "no-shuffle", false, "keep input order instead of pre-shuffling")
	fl.BoolVar(&f.force, "force", false, "replace DST if it exists")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	f.s3.register(fl)
	return c
}

func runPack(f packFlags, src, dst string) error {
	format, err := pack.ParseFormat(f.format)
	if err != nil {
		return usagef("--format: %v", err)
	}
	var rs int64
	if f.recordSize != "" {
		if rs, err = parseSize("record-size", f.recordSize); err != nil {
			return err
		}
		if rs == 0 {
			return usagef("--record-size must be at least 1 byte")
		}
	}
	if format == pack.Raw && rs == 0 {
		return usagef("--record-size is required for --format raw (the size of one record in bytes)")
	}
	var bs int64 // 0: pack chooses
	if f.blockSize != "" {
		if bs, err = parseSize("block-size", f.blockSize); err != nil {
			return err
		}
		if bs == 0 {
			return usagef("--block-size must be at least 1 byte")
		}
	}
	if bs > 0 && rs > bs {
		return usagef("--record-size %s is larger than --block-size %s; raise --block-size", ibytes(uint64(rs)), ibytes(uint64(bs)))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opt := pack.Options{Format: format, RecordSize: rs, BlockSize: bs, Seed: f.seed, NoShuffle: f.noShuffle, Force: f.force}
	var bar *progressbar.ProgressBar
	if !f.quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		opt.Progress = func(done, total int64, records uint64) {
			if bar == nil {
				bar = progressbar.NewOptions64(total,
					progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription("packing"),
					progressbar.OptionShowBytes(true),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionShowElapsedTimeOnFinish(),
					progressbar.OptionClearOnFinish())
			}
			bar.Describe(fmt.Sprintf("packing %s records", humanize.Comma(int64(records))))
			_ = bar.Set64(done)
		}
	}
	start := time.Now()
	res, err := packTo(ctx, src, dst, opt, &f.s3)
	if bar != nil {
		_ = bar.Clear()
	}
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	m := res.Manifest
	order := fmt.Sprintf("pre-shuffled with seed %d", f.seed)
	if f.noShuffle {
		order = "in input order"
	}
	kind := "variable-length"
	if m.Kind == layout.Fixed {
		kind = ibytes(uint64(m.RecordSize))
	}
	blocks := fmt.Sprintf("%d blocks", len(m.Blocks))
	if res.AutoBlock {
		blocks = fmt.Sprintf("%d blocks of %s (chosen for at least %d blocks; --block-size to set)", len(m.Blocks), ibytes(uint64(res.BlockSize)), pack.MinBlocks)
	}
	fmt.Printf("packed %d %s records (%s, %s) into %s at %s, %s, in %.1fs (%s)\n",
		m.Records, res.Format, kind, ibytes(m.Bytes), blocks, dst, order, el, rate(m.Bytes, el))
	return nil
}
