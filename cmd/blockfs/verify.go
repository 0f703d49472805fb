package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount"
)

func newVerify() *cobra.Command {
	var s3f s3Flags
	c := &cobra.Command{
		Use:   "verify DATA",
		Short: "Check a dataset's structure and every block's CRC32C",
		Long: `verify reads the whole dataset DATA: the manifest, every file's presence, type and size, and
every block file's CRC32C. DATA is a directory or s3://BUCKET/PREFIX, or the mount point of a
live mount, whose dataset it checks. It prints each problem on a line of its own (the file, the
block and what is wrong) and exits 1 if there is any, 0 if the dataset is sound.`,
		Args: exactArgs("DATA"),
		RunE: func(c *cobra.Command, args []string) error {
			report := func(err error) { fmt.Fprintf(os.Stderr, "blockfs: %v\n", err) }
			data := args[0]
			if m, ok, err := readMountpoint(data); ok {
				if err != nil {
					return err
				}
				if mount.IsRemote(m.OpenData) {
					return usagef("%s serves %s: run verify on the URL (with the mount's --endpoint, if any)", data, m.OpenData)
				}
				switch mount.Locate(m.OpenData).Kind {
				case mount.MixtureFile:
					return usagef("%s serves the mixture %s: run verify on each of its sources", data, m.OpenData)
				case mount.File:
					return usagef("%s serves %s, which is not a dataset blockfs packed or indexed: there are no checksums to verify", data, m.OpenData)
				}
				data = m.OpenData
			}
			opt, err := decodeOptions(data, "", s3f.vals)
			if err != nil {
				return err
			}
			res, err := mount.Verify(opt, report)
			if err != nil {
				return err
			}
			if res.Problems > 0 {
				todo := verifyAdvice(data, res.Problems)
				return fmt.Errorf("%s: %d problem(s) in %d blocks; %s", data, res.Problems, res.Blocks, todo)
			}
			framed := ""
			if res.Framed > 0 {
				framed = fmt.Sprintf("; %d compressed blocks decompressed whole, every frame checked (%s to %s, %.0f%%)", res.Framed,
					ibytes(uint64(res.FramedRaw)), ibytes(uint64(res.FramedStored)), 100*float64(res.FramedStored)/float64(max(res.FramedRaw, 1)))
			}
			fmt.Printf("%s: ok: %d blocks, %s checked%s\n", data, res.Blocks, ibytes(uint64(res.Bytes)), framed)
			return nil
		},
	}
	s3f.register(c.Flags())
	return c
}

// verifyAdvice says what to do about problems found in data: pack it again; for shards, restore
// them or index them again (their automatic index, marked stale, is made again by the next
// mount).
func verifyAdvice(data string, problems int) string {
	shards := data
	switch mount.Locate(data).Kind {
	case mount.ShardsIndex:
		ix, err := layout.ReadShardsIndex(data)
		if err != nil {
			return "restore the shards, or index them again (blockfs index --force SHARDS " + data + ")"
		}
		if auto, _ := mount.DefaultIndexDir(ix.Source); auto != data { // an index made by hand
			return "restore the shards, or index them again (blockfs index --force " + ix.Source + " " + data + ")"
		}
		shards = ix.Source // a mount point's: the automatic index of its shards
	case mount.Shards:
	default:
		return "re-pack the dataset"
	}
	todo := "restore the shards, or mount them again: their next mount indexes them again"
	dir, err := mount.MarkIndexStale(shards, fmt.Sprintf("blockfs verify found %d problem(s)", problems))
	switch {
	case err != nil:
		todo += fmt.Sprintf(" once their automatic index is removed (%v)", err)
	case dir != "":
		todo += " (their automatic index " + dir + " is marked stale)"
	}
	return todo
}
