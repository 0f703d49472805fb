package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount"
)

func newInfo() *cobra.Command {
	var names bool
	var inPlace inPlaceFlags
	var s3f s3Flags
	c := &cobra.Command{
		Use:   "info [--names] DATA|MOUNTPOINT",
		Short: "Describe a dataset: records, blocks, sizes, record kind, dtype and shape",
		Long: `info prints a summary of the dataset DATA: a dataset directory, or a file served in place
(with the mount's in-place and window flags). Given a MOUNTPOINT, it describes the data the
mount serves and the mount's order options. With --names it prints instead the source name of
every record (for datasets packed from a folder of files), one per line in source id order:
line i names the record whose id is i.`,
		Args: exactArgs("DATA"),
		RunE: func(c *cobra.Command, args []string) error {
			data, mnt := args[0], ""
			m, ok, err := readMountpoint(data)
			if ok {
				if err != nil {
					return err
				}
				if mount.IsRemote(m.OpenData) {
					return usagef("%s serves %s: run info on the URL", data, m.OpenData)
				}
				if inPlace, err = m.inPlace(); err != nil {
					return err
				}
				data, mnt = m.OpenData, m.Dir
			}
			loc := mount.Locate(data)
			if loc.Kind == mount.MixtureFile {
				if names {
					return usagef("--names: %s is a mixture; run info --names on one of its sources", data)
				}
				return describeMixture(c.Flags(), data)
			}
			opt, err := readOptions(data, inPlace, &s3f)
			if err != nil {
				return err
			}
			d, err := mount.Open(opt)
			if err != nil {
				return err
			}
			defer d.Close()
			if man, dss := d.Fields(); man != nil {
				if names {
					return usagef("--names: %s is a dataset with fields, whose samples are named by their ids", data)
				}
				describeFields(data, man, dss)
				return nil
			}
			if names {
				w := bufio.NewWriterSize(os.Stdout, 1<<20)
				if err := d.WriteNames(w); err != nil {
					return err
				}
				return w.Flush()
			}
			ds := d.Dataset()
			fmt.Print(describe(ds))
			if mnt != "" {
				fmt.Printf("%-13s %s (seed %d, shuffle %s, mix %d, order version %s)\n", "mounted:", mnt, m.Seed, m.Shuffle, m.Mix, orderVersion(m.OrderVersion))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&names, "names", false, "list the source name of every record, in id order")
	inPlace.register(c.Flags())
	s3f.register(c.Flags())
	return c
}

func describe(ds *layout.Dataset) string {
	m := ds.Manifest
	var b strings.Builder
	p := func(k, format string, a ...any) { fmt.Fprintf(&b, "%-13s %s\n", k+":", fmt.Sprintf(format, a...)) }
	p("dataset", "%s", ds.Dir)
	if in, ok := m.Extra["in_place"].(string); ok && ds.ShardsInPlace() {
		p("format", "%s shards served in place, through the index %s (blockfs index)", in, ds.Dir)
	} else {
		p("format", "%s version %d", m.Format, m.Version)
	}
	if ds.Kind() == layout.Fixed {
		p("records", "%d fixed-size, %s each", ds.Records(), ibytes(uint64(ds.RecordSize())))
	} else {
		p("records", "%d variable-length, %s on average", ds.Records(), ibytes(ds.Bytes()/ds.Records()))
	}
	p("size", "%s (%d bytes)", ibytes(ds.Bytes()), ds.Bytes())
	if c, stored, raw := ds.Compression(); c != nil {
		p("compressed", "%s level %d in frames of %s: %s stored for %s of blocks (%.0f%%)", c.Codec, c.Level, ibytes(uint64(c.Frame)),
			ibytes(stored), ibytes(raw), 100*float64(stored)/float64(max(raw, 1)))
	}
	if path, off, ok := ds.InPlace(); ok {
		p("in place", "%s, records from byte %d", path, off)
	}
	if l, stride, row, segs, ok := ds.Window(); ok {
		p("windows", "%d rows of %s each, every %d rows, in %d segments", l, ibytes(uint64(row)), stride, max(segs, 1))
	}
	minB, maxB := ds.BlockBytes(0), ds.BlockBytes(0)
	for i := 1; i < ds.Blocks(); i++ {
		minB, maxB = min(minB, ds.BlockBytes(i)), max(maxB, ds.BlockBytes(i))
	}
	p("blocks", "%d, %s to %s", ds.Blocks(), ibytes(minB), ibytes(maxB))
	if m.DType != "" {
		p("dtype", "%s", m.DType)
		p("shape", "%v per record", m.Shape)
	}
	if m.PreShuffle.Shuffled {
		p("pre-shuffle", "yes, seed %d (source ids stored)", m.PreShuffle.Seed)
	} else if m.IDs { // a merge of parts pre-shuffled each (pack --merge)
		p("pre-shuffle", "within each part packed, seed %d (source ids stored)", m.PreShuffle.Seed)
	} else {
		p("pre-shuffle", "no (storage order is input order)")
	}
	if m.Source != "" {
		p("source", "%s", m.Source)
	}
	if m.Names != nil {
		p("names", "kept (blockfs info --names)")
	}
	return b.String()
}

// describeFields prints what info says of a dataset with fields: its samples, then each field
// as info describes a dataset.
func describeFields(dir string, man *layout.FieldsManifest, dss []*layout.Dataset) {
	fmt.Printf("%-13s %s\n", "dataset:", dir)
	fmt.Printf("%-13s %d samples with %d fields, in input order (%s)\n", "records:", man.Records, len(man.Fields), man.Source)
	for i, fl := range man.Fields {
		what := string(fl.Kind)
		if fl.DType != "" {
			what += " " + fl.DType
		}
		if len(fl.Shape) > 0 {
			what += fmt.Sprint(fl.Shape)
		}
		fmt.Printf("\nfield %s (%s): epoch-NNNN.%s\n", fl.Name, what, fl.Name)
		fmt.Print(describe(dss[i]))
	}
}
