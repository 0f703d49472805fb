package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/pack"
)

func newIndex() *cobra.Command {
	var (
		s3f       s3Flags
		blockSize string
		part      string
		merge     bool
		opt       pack.IndexOptions
	)
	c := &cobra.Command{
		Use:   "index [--part I/N] SHARDS OUT | index --merge OUT",
		Short: "Index WebDataset or TFRecord shards to serve them in place",
		Long: `index reads every shard of SHARDS once (a folder, a quoted glob or an s3://, gs:// or az:// prefix of WebDataset
.tar shards or TFRecord files), checking tar header checksums and TFRecord CRCs, and writes into the
directory OUT where each sample's values are. blockfs mount OUT MNT (or blockfs mount SHARDS MNT,
which indexes on its first mount) then serves the shards as pack would have made of them, samples
as fields, without copying them. An index is refused once its shards change: index them again.
With --part I/N, index part I's share of the shards into OUT/parts/ (anywhere, with no
coordination); index --merge OUT, once every part is there, writes OUT's index of them all.`,
		Args: func(c *cobra.Command, args []string) error {
			if merge {
				return exactArgs("OUT")(c, args)
			}
			return exactArgs("SHARDS", "OUT")(c, args)
		},
		RunE: func(c *cobra.Command, args []string) error {
			if merge {
				ix, err := pack.MergeIndex(args[0], opt.Force)
				if err != nil {
					return err
				}
				printIndex(args[0], ix)
				return nil
			}
			so, err := s3f.decode()
			if err != nil {
				return err
			}
			var p *pack.Part
			if part != "" {
				pp, err := pack.ParsePart(part)
				if err != nil {
					return err
				}
				p = &pp
			}
			if blockSize != "" {
				if opt.BlockSize, err = parseSize("block-size", blockSize); err != nil {
					return err
				}
			}
			var filled []string
			var total int64
			opt.Filled = func(field string, n int64) {
				filled = append(filled, fmt.Sprintf("%s %d", field, n))
				total += n
			}
			ix, err := indexShards(args[0], args[1], p, opt, so)
			if err != nil {
				return err
			}
			if len(filled) > 0 { // as pack says it
				fmt.Fprintf(os.Stderr, "note: filled %d empty values (--fill-missing) of %d samples: %s\n", total, ix.Records, strings.Join(filled, ", "))
			}
			printIndex(args[1], ix)
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&blockSize, "block-size", "", "values (all fields) after which a block ends; a block also ends with its shard (default: as pack chooses)")
	fl.BoolVar(&opt.FillMissing, "fill-missing", false, "give a sample that lacks a field an empty value (as pack)")
	fl.BoolVar(&opt.Force, "force", false, "replace an index already at OUT")
	fl.StringVar(&part, "part", "", "index part I of N (0 <= I < N) of the shards into OUT/parts/ (index --merge OUT once all are there)")
	fl.BoolVar(&merge, "merge", false, "write OUT's index of its parts (OUT/parts/part-I-of-N, every I)")
	s3f.register(fl)
	return c
}

// indexShards indexes the shards at src (a folder, a quoted glob or a store's prefix) into the
// directory out, or part's share of them into out/parts/ (part nil: all of them).
func indexShards(src, out string, part *pack.Part, opt pack.IndexOptions, so mount.Options) (*layout.ShardsIndex, error) {
	ctx := context.Background()
	format, at, shards, err := mount.ListShards(ctx, src, so.S3)
	if err != nil {
		return nil, err
	}
	if part != nil {
		return pack.IndexPart(ctx, pack.Format(format), at, shards, out, *part, opt)
	}
	return pack.Index(ctx, pack.Format(format), at, shards, out, opt)
}

// printIndex prints what an index (or a part of one) at out holds.
func printIndex(out string, ix *layout.ShardsIndex) {
	var bytes uint64
	for _, b := range ix.Blocks {
		for _, n := range b.Bytes {
			bytes += n
		}
	}
	fmt.Printf("%s: %d samples of %d %s shards, fields %v, %s of values in %d blocks (nothing copied)\n",
		out, ix.Records, len(ix.Shards), ix.Input, ix.Fields, ibytes(bytes), len(ix.Blocks))
}
