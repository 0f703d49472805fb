package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/pack"
)

func newIndex() *cobra.Command {
	var (
		s3f       s3Flags
		blockSize string
		opt       pack.IndexOptions
	)
	c := &cobra.Command{
		Use:   "index SHARDS OUT",
		Short: "Index WebDataset or TFRecord shards to serve them in place",
		Long: `index reads every shard of SHARDS once (a folder, a quoted glob or an s3:// prefix of WebDataset
.tar shards or TFRecord files), checking tar header checksums and TFRecord CRCs, and writes into the
directory OUT where each sample's values are. blockfs mount OUT MNT (or blockfs mount SHARDS MNT,
which indexes on its first mount) then serves the shards as pack would have made of them, samples
as fields, without copying them. An index is refused once its shards change: index them again.`,
		Args: exactArgs("SHARDS", "OUT"),
		RunE: func(c *cobra.Command, args []string) error {
			so, err := s3f.decode()
			if err != nil {
				return err
			}
			if blockSize != "" {
				if opt.BlockSize, err = parseSize("block-size", blockSize); err != nil {
					return err
				}
			}
			ix, err := mount.IndexShards(context.Background(), args[0], args[1], opt, so.S3)
			if err != nil {
				return err
			}
			var bytes uint64
			for _, b := range ix.Blocks {
				for _, n := range b.Bytes {
					bytes += n
				}
			}
			fmt.Printf("%s: %d samples of %d %s shards, fields %v, %s of values in %d blocks (nothing copied)\n",
				args[1], ix.Records, len(ix.Shards), ix.Input, ix.Fields, ibytes(bytes), len(ix.Blocks))
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&blockSize, "block-size", "", "values (all fields) after which a block ends; a block also ends with its shard (default: as pack chooses)")
	fl.BoolVar(&opt.FillMissing, "fill-missing", false, "give a sample that lacks a field an empty value (as pack)")
	fl.BoolVar(&opt.Force, "force", false, "replace an index already at OUT")
	s3f.register(fl)
	return c
}
