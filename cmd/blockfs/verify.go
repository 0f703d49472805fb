package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
			switch {
			case mount.IsRemote(args[0]):
				s3opt, oerr := s3f.options()
				if oerr != nil {
					return oerr
				}
				man, ferr := mount.RemoteFields(args[0], s3opt)
				if ferr != nil {
					return ferr
				}
				if man == nil {
					st, serr := s3f.openStore(args[0])
					if serr != nil {
						return serr
					}
					res, err = layout.VerifyStore(st, report)
					break
				}
				res, err = verifyFields(args[0], man, report, func(data string) (layout.VerifyResult, *layout.Dataset, error) {
					fst, err := s3f.openStore(data)
					if err != nil {
						return layout.VerifyResult{}, nil, err
					}
					res, err := layout.VerifyStore(fst, report)
					if err != nil || res.Problems > 0 {
						return res, nil, err
					}
					ds, err := layout.OpenStore(fst)
					return res, ds, err
				})
			case layout.IsFields(args[0]):
				man, merr := layout.ReadFieldsManifest(args[0])
				if merr != nil {
					return merr
				}
				res, err = verifyFields(args[0], man, report, func(data string) (layout.VerifyResult, *layout.Dataset, error) {
					res, err := local.Verify(data, report)
					if err != nil || res.Problems > 0 {
						return res, nil, err
					}
					ds, err := local.Open(data)
					return res, ds, err
				})
			default:
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

// verifyFields verifies every field of the dataset with fields at data (a directory or an
// s3:// URL) whose manifest is man, with verify (which verifies the dataset at a field's place
// and opens it when it has no problem), and that they are cut alike: the fields cut at the
// samples at the same samples, those with blocks of their own fixed-size in stored order.
func verifyFields(data string, man *layout.FieldsManifest, report func(error), verify func(data string) (layout.VerifyResult, *layout.Dataset, error)) (layout.VerifyResult, error) {
	var all layout.VerifyResult
	var counts []uint64
	for _, fl := range man.Fields {
		res, ds, err := verify(fieldPlace(data, fl))
		if err != nil {
			return all, fmt.Errorf("field %q: %w", fl.Name, err)
		}
		all.Problems += res.Problems
		all.Blocks += res.Blocks
		all.Bytes += res.Bytes
		if res.Problems > 0 {
			continue
		}
		if ds.Records() != man.Records {
			report(fmt.Errorf("%s: field %q has %d records; the dataset says %d", data, fl.Name, ds.Records(), man.Records))
			all.Problems++
		}
		if fl.Own() {
			if ds.Kind() != layout.Fixed || ds.HasIDs() || ds.RecordSize() != fl.RecordSize {
				report(fmt.Errorf("%s: field %q has blocks of its own but is not %d-byte records in stored order", data, fl.Name, fl.RecordSize))
				all.Problems++
			}
			continue
		}
		if c := ds.BlockCounts(); counts == nil {
			counts = c
		} else if !slices.Equal(c, counts) {
			report(fmt.Errorf("%s: field %q's blocks hold other records than field %q's: the fields must be cut at the same samples", data, fl.Name, man.Fields[man.Anchor()].Name))
			all.Problems++
		}
	}
	return all, nil
}

// fieldPlace returns where field fl of the dataset with fields at data is.
func fieldPlace(data string, fl layout.Field) string {
	if mount.IsRemote(data) {
		return strings.TrimSuffix(data, "/") + "/" + fl.Dir
	}
	return filepath.Join(data, filepath.FromSlash(fl.Dir))
}
