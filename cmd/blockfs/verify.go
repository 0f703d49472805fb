package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/layout"
)

func newVerify() *cobra.Command {
	return &cobra.Command{
		Use:   "verify DATA",
		Short: "Check a dataset's structure and every block's CRC32C",
		Long: `verify reads the whole dataset DATA: the manifest, every file's presence, type and size, and
every block file's CRC32C. It prints each problem on a line of its own (the file, the block and
what is wrong) and exits 1 if there is any, 0 if the dataset is sound.`,
		Args: exactArgs("DATA"),
		RunE: func(c *cobra.Command, args []string) error {
			res, err := layout.Verify(args[0], func(err error) { fmt.Fprintf(os.Stderr, "blockfs: %v\n", err) })
			if err != nil {
				return err
			}
			if res.Problems > 0 {
				return fmt.Errorf("%s: %d problem(s) in %d blocks; re-pack the dataset", args[0], res.Problems, res.Blocks)
			}
			fmt.Printf("%s: ok: %d blocks, %s checked\n", args[0], res.Blocks, ibytes(uint64(res.Bytes)))
			return nil
		},
	}
}
