package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/layout"
)

func newInfo() *cobra.Command {
	return &cobra.Command{
		Use:   "info DATA",
		Short: "Describe a dataset: records, blocks, sizes, record kind, dtype and shape",
		Args:  exactArgs("DATA"),
		RunE: func(c *cobra.Command, args []string) error {
			ds, err := layout.Open(args[0])
			if err != nil {
				return err
			}
			fmt.Print(describe(ds))
			return nil
		},
	}
}

func describe(ds *layout.Dataset) string {
	m := ds.Manifest
	var b strings.Builder
	p := func(k, format string, a ...any) { fmt.Fprintf(&b, "%-13s %s\n", k+":", fmt.Sprintf(format, a...)) }
	p("dataset", "%s", ds.Dir)
	p("format", "%s version %d", m.Format, m.Version)
	if ds.Kind() == layout.Fixed {
		p("records", "%d fixed-size, %s each", ds.Records(), ibytes(uint64(ds.RecordSize())))
	} else {
		p("records", "%d variable-length, %s on average", ds.Records(), ibytes(ds.Bytes()/ds.Records()))
	}
	p("size", "%s (%d bytes)", ibytes(ds.Bytes()), ds.Bytes())
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
	} else {
		p("pre-shuffle", "no (storage order is input order)")
	}
	if m.Source != "" {
		p("source", "%s", m.Source)
	}
	return b.String()
}
