package main

import (
	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/mount"
)

// mixtureOptions reads the mixture file path (mount.ReadMixture): each source's options over
// the PerSource options given on the command line fl.
func mixtureOptions(fl *pflag.FlagSet, path, mnt string) (*mount.Mixture, error) {
	return mount.ReadMixture(path, valuesOf(fl))
}
