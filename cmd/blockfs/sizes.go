package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/dustin/go-humanize"
)

// parseSize reads a byte count with an optional unit: 4096, 64KiB, 16MiB, 1GiB (powers of
// 1024) or 64KB, 16MB (powers of 1000). flag names the option in the error.
func parseSize(flag, s string) (int64, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "-") {
		return 0, usagef("--%s %s: must not be negative", flag, s)
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, usagef("--%s %q is not a size (use bytes or units such as 64KiB, 16MiB, 1GiB)", flag, s)
	}
	if n > math.MaxInt64/2 {
		return 0, usagef("--%s %s is too large", flag, s)
	}
	return int64(n), nil
}

// ibytes prints a byte count in IEC units (16 MiB).
func ibytes(n uint64) string { return humanize.IBytes(n) }

// rate prints bytes per second.
func rate(n uint64, seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return fmt.Sprintf("%s/s", humanize.IBytes(uint64(float64(n)/seconds)))
}
