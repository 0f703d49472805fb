//go:build tables

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The per-batch panels leave room above the highest line (the legend sits there, not over a
// good order's line along the top) and label ticks as numbers are written.
func TestPlotSeriesHeadroomAndTicks(t *testing.T) {
	ours := []float64{250, 256, 256, 255}
	uni := []float64{160, 162, 158, 161}
	p, err := seriesPlot("t", "batch", "blocks", ours, uni)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, p.Y.Max, 256*1.25, "headroom above the highest line")
	assert.Equal(t, 0.0, p.Y.Min)
	for _, ax := range []struct {
		lo, hi float64
	}{{0, 250000}, {0, 25}, {0, 1}} {
		for _, tk := range (plainTicks{}).Ticks(ax.lo, ax.hi) {
			if tk.Label == "" {
				continue
			}
			assert.False(t, strings.HasSuffix(tk.Label, ".00") || strings.HasSuffix(tk.Label, ".0"), "tick %q of [%v, %v]", tk.Label, ax.lo, ax.hi)
		}
	}
	labels := []string{}
	for _, tk := range (plainTicks{}).Ticks(0, 250000) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	assert.Equal(t, []string{"0", "100000", "200000"}, labels)
}
