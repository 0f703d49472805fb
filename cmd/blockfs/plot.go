//go:build tables

package main

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/shuffle"
)

// order --stats --plot draws what the figures say, beside a uniform shuffle of the same
// records, with gonum/plot (the Gonum project's plotting library): blocks per batch, label
// balance per batch (with --labels), and where each record of the epoch lands in the next.

// plotPoints bounds the records the epoch-to-epoch panels draw.
const plotPoints = 4000

var (
	orderColor   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	uniformColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// checkPlotPath checks --plot FILE: a .png or .svg in a directory that exists.
func checkPlotPath(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg":
	default:
		return usagef("--plot %s: give a .png or .svg file", path)
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return usagef("--plot %s: no directory %s to write it in", path, filepath.Dir(path))
	}
	return nil
}

// plotOrder writes the plot of epoch cur (next: the epoch after it) beside a uniform shuffle
// (uni, uni2: two) to path; title says what is drawn.
func plotOrder(path, title string, cur, next, uni, uni2 shuffle.Sample, labels []int32) error {
	var panels []*plot.Plot
	blocks, tv := shuffle.BatchSeries(cur, labels, plotBatch)
	ublocks, utv := shuffle.BatchSeries(uni, labels, plotBatch)
	p, err := seriesPlot(title, fmt.Sprintf("batch of %d records", plotBatch), "distinct blocks in the batch", blocks, ublocks)
	if err != nil {
		return err
	}
	panels = append(panels, p)
	if labels != nil {
		if p, err = seriesPlot("label balance per batch", fmt.Sprintf("batch of %d records", plotBatch), "labels' distance from the dataset's (TV)", tv, utv); err != nil {
			return err
		}
		panels = append(panels, p)
	}
	for _, c := range []struct {
		name      string
		a, b      shuffle.Sample
		highlight color.Color
	}{{"this order", cur, next, orderColor}, {"uniform shuffle", uni, uni2, uniformColor}} {
		if p, err = movesPlot("where each record of the epoch lands in the next: "+c.name, c.a, c.b, c.highlight); err != nil {
			return err
		}
		panels = append(panels, p)
	}
	return savePanels(path, panels)
}

// plotMixture writes the plot of a mixture's epoch to path: per batch, how far its sources'
// counts stray from their shares, beside a uniform shuffle of the same records.
func plotMixture(path, title string, ours, uniform []float64) error {
	p, err := seriesPlot(title, fmt.Sprintf("batch of %d records", plotBatch), "largest |count - share| of a source", ours, uniform)
	if err != nil {
		return err
	}
	return savePanels(path, []*plot.Plot{p})
}

// seriesPlot draws a per-batch series of this order and of a uniform shuffle.
func seriesPlot(title, x, y string, ours, uniform []float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	top := 0.0
	for _, s := range []struct {
		name string
		v    []float64
		c    color.Color
	}{{"this order", ours, orderColor}, {"uniform shuffle", uniform, uniformColor}} {
		pts := make(plotter.XYs, len(s.v))
		for i, v := range s.v {
			pts[i] = plotter.XY{X: float64(i), Y: v}
			top = max(top, v)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = s.c
		l.Width = vg.Points(0.8)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	// Room above the highest line for the legend: a good order's line runs along the top,
	// where the legend would hide it.
	p.Y.Min, p.Y.Max = 0, max(top, 1e-9)*1.3
	return p, nil
}

// plainTicks are gonum's default ticks labelled as numbers are written: 250000, 0.25 (not
// 250000.00, 0.25000).
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// movesPlot draws, for up to plotPoints records spread over epoch a, their position in a
// against their position in b.
func movesPlot(title string, a, b shuffle.Sample, c color.Color) (*plot.Plot, error) {
	at := make(map[uint64]int, len(b.IDs))
	for i, id := range b.IDs {
		at[id] = i
	}
	step := max(1, len(a.IDs)/plotPoints)
	var pts plotter.XYs
	for i := 0; i < len(a.IDs); i += step {
		if j, ok := at[a.IDs[i]]; ok {
			pts = append(pts, plotter.XY{X: float64(i), Y: float64(j)})
		}
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "position in epoch e"
	p.Y.Label.Text = "position in epoch e+1"
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	s, err := plotter.NewScatter(pts)
	if err != nil {
		return nil, err
	}
	s.GlyphStyle.Color = c
	s.GlyphStyle.Radius = vg.Points(0.9)
	s.GlyphStyle.Shape = draw.CircleGlyph{}
	p.Add(s)
	return p, nil
}

// savePanels stacks the plots in one image at path, PNG or SVG by its extension.
func savePanels(path string, panels []*plot.Plot) error {
	w, h := 9*vg.Inch, vg.Length(len(panels))*3*vg.Inch
	var c vg.CanvasWriterTo
	if strings.EqualFold(filepath.Ext(path), ".svg") {
		c = vgsvg.New(w, h)
	} else {
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))}
	}
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(8), PadY: vg.Points(16), PadLeft: vg.Points(6), PadRight: vg.Points(12)}
	canvases := plot.Align(grid, tiles, draw.New(c))
	for i := range grid {
		grid[i][0].Draw(canvases[i][0])
	}
	f, err := userfile.Create(path) // no symbolic link, FIFO or device there
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	if _, err := c.(io.WriterTo).WriteTo(f); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return f.Close()
}
