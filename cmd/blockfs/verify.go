package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/source/local"
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
			var res layout.VerifyResult
			var err error
			if mount.IsRemote(args[0]) {
				st, serr := s3f.openStore(args[0])
				if serr != nil {
					return serr
				}
				res, err = layout.VerifyStore(st, report)
			} else if layout.IsFields(args[0]) {
				res, err = verifyFields(args[0], report)
			} else {
				res, err = local.Verify(args[0], report)
			}
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
	s3f.register(c.Flags())
	return c
}

// verifyFields verifies every field of a dataset with fields, and that they are cut alike.
func verifyFields(dir string, report func(error)) (layout.VerifyResult, error) {
	var all layout.VerifyResult
	man, err := layout.ReadFieldsManifest(dir)
	if err != nil {
		return all, err
	}
	var counts []uint64
	for i, fl := range man.Fields {
		res, err := local.Verify(filepath.Join(dir, filepath.FromSlash(fl.Dir)), report)
		if err != nil {
			return all, fmt.Errorf("field %q: %w", fl.Name, err)
		}
		all.Problems += res.Problems
		all.Blocks += res.Blocks
		all.Bytes += res.Bytes
		if res.Problems > 0 {
			continue
		}
		ds, err := local.Open(filepath.Join(dir, filepath.FromSlash(fl.Dir)))
		if err != nil {
			return all, err
		}
		if ds.Records() != man.Records {
			report(fmt.Errorf("%s: field %q has %d records; the dataset says %d", dir, fl.Name, ds.Records(), man.Records))
			all.Problems++
		}
		c := ds.BlockCounts()
		if i == 0 || counts == nil {
			counts = c
		} else if !slices.Equal(c, counts) {
			report(fmt.Errorf("%s: field %q's blocks hold other records than the first field's: the fields must be cut at the same samples", dir, fl.Name))
			all.Problems++
		}
	}
	return all, nil
}
