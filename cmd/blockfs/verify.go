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
				if k := mount.Locate(m.OpenData).Kind; k == mount.File || k == mount.MixtureFile {
					return usagef("%s serves %s, which is not a dataset blockfs packed or indexed: there are no checksums to verify", data, m.OpenData)
				}
				data = m.OpenData
			}
			opt, err := mount.Decode(data, "", s3f.vals)
			if err != nil {
				return err
			}
			res, err := mount.Verify(opt, report)
			if err != nil {
				return err
			}
			if res.Problems > 0 {
				todo := "re-pack the dataset"
				switch mount.Locate(data).Kind {
				case mount.ShardsIndex:
					todo = "restore the shards, or index them again (blockfs index --force SHARDS " + data + ")"
					if ix, err := layout.ReadShardsIndex(data); err == nil {
						todo = "restore the shards, or index them again (blockfs index --force " + ix.Source + " " + data + ")"
					}
				case mount.Shards:
					todo = "restore the shards, or mount them again: their next mount indexes them again"
					dir, err := mount.MarkIndexStale(data, fmt.Sprintf("blockfs verify found %d problem(s)", res.Problems))
					switch {
					case err != nil:
						todo += fmt.Sprintf(" once their automatic index is removed (%v)", err)
					case dir != "":
						todo += " (their automatic index " + dir + " is marked stale)"
					}
				}
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
