package main

import (
	"fmt"
	"os"

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
// and opens it when it has no problem), and that each is what the manifest says of it
// (layout.FieldsManifest.CheckField): its kind, record size, dtype, shape and records, and
// cut at the same samples as the others.
func verifyFields(data string, man *layout.FieldsManifest, report func(error), verify func(data string) (layout.VerifyResult, *layout.Dataset, error)) (layout.VerifyResult, error) {
	var all layout.VerifyResult
	dss := make([]*layout.Dataset, len(man.Fields))
	for i, fl := range man.Fields {
		at, err := mount.FieldData(data, fl)
		if err != nil {
			return all, err
		}
		res, ds, err := verify(at)
		if err != nil {
			return all, fmt.Errorf("field %q: %w", fl.Name, err)
		}
		all.Problems += res.Problems
		all.Blocks += res.Blocks
		all.Bytes += res.Bytes
		if res.Problems > 0 {
			continue
		}
		dss[i] = ds
		var anchor *layout.Dataset
		if a := man.Anchor(); a < i {
			anchor = dss[a] // nil if it had problems
		}
		if err := man.CheckField(i, ds, anchor); err != nil {
			report(err)
			all.Problems++
		}
	}
	return all, nil
}
