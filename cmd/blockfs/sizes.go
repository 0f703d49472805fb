package main

import (
	"fmt"

	"github.com/blockfs/blockfs/mount"
	"github.com/dustin/go-humanize"
)

// parseSize reads a byte count with an optional unit (mount.ParseSize: one parser for every
// command). flag names the option in the error.
func parseSize(flag, s string) (int64, error) { return mount.ParseSize(flag, s) }

// ibytes prints a byte count in IEC units (16 MiB).
func ibytes(n uint64) string { return humanize.IBytes(n) }

// rate prints bytes per second.
func rate(n uint64, seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return fmt.Sprintf("%s/s", humanize.IBytes(uint64(float64(n)/seconds)))
}
