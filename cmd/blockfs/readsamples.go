package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/pack"
)

// newReadSamples is the hidden command blockfs pack runs in blockfs-tables to read Parquet and
// Arrow: it writes the samples to stdout as pack's sample stream (pack/samplepipe.go).
func newReadSamples() *cobra.Command {
	var format, columns string
	c := &cobra.Command{
		Use:    "read-samples --format parquet|arrow [--columns A,B] -- FILE...",
		Short:  "Write a table's samples as pack's sample stream (run by blockfs pack in " + pack.TablesBinary + ")",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var cols []string
			if columns != "" {
				cols = strings.Split(columns, ",")
			}
			r, err := pack.ReadTable(pack.Format(format), args, cols)
			if err != nil {
				return err
			}
			defer r.Close()
			return pack.WriteSamples(os.Stdout, r)
		},
	}
	c.Flags().StringVar(&format, "format", "", "parquet or arrow")
	c.Flags().StringVar(&columns, "columns", "", "the columns to read, comma-separated")
	return c
}
