package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/pack"
)

// newReadSamples is the hidden command blockfs pack runs in blockfs-tables to read Parquet and
// Arrow: it reads what to read (pack.SamplesSpec, JSON) on stdin and writes the samples to
// stdout as pack's sample stream (pack/samplepipe.go).
func newReadSamples() *cobra.Command {
	return &cobra.Command{
		Use:    pack.ReadSamplesCommand + " < SPEC.json",
		Short:  "Write a table's samples as pack's sample stream (run by blockfs pack in " + pack.TablesBinary + ")",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE:   func(c *cobra.Command, args []string) error { return pack.ServeSamples(os.Stdin, os.Stdout) },
	}
}
