package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

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
}

func newPack() *cobra.Command {
	var f packFlags
	c := &cobra.Command{
		Use:   "pack --format raw --record-size BYTES [flags] SRC DST",
		Short: "Pack input records into a block dataset",
		Long: `pack turns SRC into a dataset directory DST. With --format raw, SRC is a flat file of
fixed-size records (as numpy's tofile or np.memmap write). By default records are assigned to
blocks in a seeded random order (block shuffling is only as good as this pre-shuffle);
--no-shuffle keeps input order, so record i lands in block i / records-per-block.

DST is written in a temporary directory next to it and renamed at the end: an interrupted or
failed pack leaves nothing behind, and an existing DST is only replaced with --force.`,
		Args: exactArgs("SRC", "DST"),
		RunE: func(c *cobra.Command, args []string) error { return runPack(f, args[0], args[1]) },
	}
	fl := c.Flags()
	fl.StringVar(&f.format, "format", "raw", "input format: raw")
	fl.StringVar(&f.recordSize, "record-size", "", "bytes per record (raw), e.g. 4096 or 4KiB")
	fl.StringVar(&f.blockSize, "block-size", humanizeDefault(layout.DefaultBlockSize), "target block file size")
	fl.Uint64Var(&f.seed, "seed", 0, "pre-shuffle seed")
	fl.BoolVar(&f.noShuffle, "no-shuffle", false, "keep input order instead of pre-shuffling")
	fl.BoolVar(&f.force, "force", false, "replace DST if it exists")
	return c
}

func humanizeDefault(n int64) string { return ibytes(uint64(n)) }

func runPack(f packFlags, src, dst string) error {
	if f.format != "raw" {
		return usagef("--format %q is not supported yet (supported: raw)", f.format)
	}
	if f.recordSize == "" {
		return usagef("--record-size is required for --format raw (the size of one record in bytes)")
	}
	rs, err := parseSize("record-size", f.recordSize)
	if err != nil {
		return err
	}
	if rs == 0 {
		return usagef("--record-size must be at least 1 byte")
	}
	bs, err := parseSize("block-size", f.blockSize)
	if err != nil {
		return err
	}
	if bs == 0 {
		return usagef("--block-size must be at least 1 byte")
	}
	if rs > bs {
		return usagef("--record-size %s is larger than --block-size %s; raise --block-size", ibytes(uint64(rs)), ibytes(uint64(bs)))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	m, err := pack.Raw(ctx, src, dst, pack.Options{
		RecordSize: rs, BlockSize: bs, Seed: f.seed, NoShuffle: f.noShuffle, Force: f.force,
	})
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	order := fmt.Sprintf("pre-shuffled with seed %d", f.seed)
	if f.noShuffle {
		order = "in input order"
	}
	fmt.Printf("packed %d records of %s (%s) into %d blocks at %s, %s, in %.1fs (%s)\n",
		m.Records, ibytes(uint64(rs)), ibytes(m.Bytes), len(m.Blocks), dst, order, el, rate(m.Bytes, el))
	return nil
}
