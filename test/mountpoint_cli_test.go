package test

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOrderAndInfoOnAMountpoint: order and info given a mountpoint use the data, flags and
// order options the mount was started with (a packed dataset, and windows over a file in
// place); contradicting order flags are refused in one line.
func TestOrderAndInfoOnAMountpoint(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	src := float32Npy(t, t.TempDir(), 3000, 4, func(r, c int) float32 { return rng.Float32() })
	dst := packCLI(t, src, "--block-size", "4KiB")
	m := mount(t, dst, "--seed", "5", "--mix", "2", "--cache-size", "8MiB", "--readahead", "64KiB")
	for _, c := range []struct{ file, shard string }{{"epoch-0003.ids", ""}, {"shard-1-of-3/epoch-0003.ids", "1/3"}} {
		args := []string{"order", "--ids", "--epoch", "3", m.dir}
		if c.shard != "" {
			args = append(args, "--shard", c.shard)
		}
		assert.Equal(t, idsText(t, m.path(c.file)), mustRun(t, args...), c.file)
	}
	_, errs, code := run(t, "order", "--ids", "--seed", "2", m.dir)
	assert.Equal(t, 2, code)
	assert.Equal(t, 1, strings.Count(errs, "\n"), errs)
	assert.Contains(t, errs, "--seed: "+m.dir+" is a mount")
	info := mustRun(t, "info", m.dir)
	assert.Contains(t, info, "3000 fixed-size")
	assert.Contains(t, info, "mounted:      "+m.dir+" (seed 5, shuffle full, mix 2, order version 2)")

	// Windows over a file in place: the mount's flags come along, --segments by absolute path.
	segs := filepath.Join(t.TempDir(), "segs.json")
	require.NoError(t, os.WriteFile(segs, []byte(`{"index_map": [{"start_row": 0, "end_row": 1499}, {"start_row": 1500, "end_row": 2999}]}`), 0o644))
	w := mount(t, src, "--window", "8", "--stride", "2", "--segments", segs, "--block-size", "4KiB", "--seed", "1",
		"--cache-size", "8MiB", "--readahead", "64KiB")
	assert.Equal(t, idsText(t, w.path("epoch-0002.ids")), mustRun(t, "order", "--ids", "--epoch", "2", w.dir))
	info = mustRun(t, "info", w.dir)
	assert.Contains(t, info, "windows:      8 rows of 16 B each, every 2 rows, in 2 segments")
	assert.Contains(t, info, "in place:     "+src)
	// And info on the file served in place itself, with the same flags.
	assert.Contains(t, mustRun(t, "info", src, "--window", "8", "--stride", "2", "--segments", segs), "1494 fixed-size")
}

// TestOrderStatsNpyLabels: --labels takes a .npy of integers as well as a text file.
func TestOrderStatsNpyLabels(t *testing.T) {
	src := float32Npy(t, t.TempDir(), 1000, 2, func(r, c int) float32 { return float32(r) })
	dst := packCLI(t, src, "--block-size", "1KiB", "--no-shuffle")
	var text strings.Builder
	data := make([]byte, 0, 2000)
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&text, "%d\n", i/100)
		data = binary.LittleEndian.AppendUint16(data, uint16(i/100))
	}
	txt := filepath.Join(t.TempDir(), "labels.txt")
	require.NoError(t, os.WriteFile(txt, []byte(text.String()), 0o644))
	npy := npyFile(t, t.TempDir(), "{'descr': '<u2', 'fortran_order': False, 'shape': (1000,), }", data)
	assert.Equal(t, mustRun(t, "order", dst, "--stats", "--labels", txt), mustRun(t, "order", dst, "--stats", "--labels", npy))
	bad := npyFile(t, t.TempDir(), "{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", make([]byte, 4000))
	_, errs, code := run(t, "order", dst, "--stats", "--labels", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "want a one-axis array of integers")
}

// TestPackChoosesBlockSize: without --block-size a small input is cut into at least 64 blocks
// and pack says what it chose.
func TestPackChoosesBlockSize(t *testing.T) {
	src := float32Npy(t, t.TempDir(), 60000, 196, func(r, c int) float32 { return 0 }) // 47 MB, as Fashion-MNIST
	out := mustRun(t, "pack", "--quiet", src, filepath.Join(t.TempDir(), "ds"))
	assert.Contains(t, out, "into 65 blocks of 716 KiB (chosen for at least 64 blocks; --block-size to set)")
}
