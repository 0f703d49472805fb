package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/mount"
)

func newVerify() *cobra.Command {
	var s3f s3Flags
	c := &cobra.Command{
		Use:   "verify DATA",
		Short: "Check a dataset's structure and every block's CRC32C",
		Long: `verify reads the whole dataset DATA: the manifest, every file's presence, type and size, and
every block file's CRC32C. DATA is a directory or s3://BUCKET/PREFIX. It prints each problem on a line of its own (the file, the block and
what is wrong) and exits 1 if there is any, 0 if the dataset is sound.`,
		Args: exactArgs("DATA"),
		RunE: func(c *cobra.Command, args []string) error {
			report := func(err error) { fmt.Fprintf(os.Stderr, "blockfs: %v\n", err) }
			opt, err := mount.Decode(args[0], "", s3f.vals)
			if err != nil {
				return err
			}
			res, err := mount.Verify(opt, report)
			if err != nil {
				return err
			}
			if res.Problems > 0 {
				todo := "re-pack the dataset"
				if k := mount.Locate(args[0]).Kind; k == mount.ShardsIndex || k == mount.Shards {
					todo = "restore the shards, or index them again (blockfs index --force)"
				}
				return fmt.Errorf("%s: %d problem(s) in %d blocks; %s", args[0], res.Problems, res.Blocks, todo)
			}
			framed := ""
			if res.Framed > 0 {
				framed = fmt.Sprintf("; %d compressed blocks decompressed whole, every frame checked (%s to %s, %.0f%%)", res.Framed,
					ibytes(uint64(res.FramedRaw)), ibytes(uint64(res.FramedStored)), 100*float64(res.FramedStored)/float64(max(res.FramedRaw, 1)))
			}
			fmt.Printf("%s: ok: %d blocks, %s checked%s\n", args[0], res.Blocks, ibytes(uint64(res.Bytes)), framed)
			return nil
		},
	}
	s3f.register(c.Flags())
	return c
}
