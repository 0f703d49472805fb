package test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/corpus"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source/stack"
)

// TestCacheGrowsForReaders: four readers of a compressed pack's shards at once, each in a
// window of its own, through a mount whose budget (--cache-size 192MiB) holds their windows but
// whose planned cache (for one reader: two windows of 32 MiB) does not. The daemon grows its
// cache to five windows (a place each, and one more) within the budget, giving up blocks it
// kept resident in the kernel's page cache, and says so; epochs read after that load each
// byte about once, where the cache
// as planned loaded 1.3-1.5 bytes (a frame decompressed again) for each byte served. The
// daemon's peak RSS stays within the budget, decompression's bound and the constant. With a
// budget that cannot hold the windows (--cache-size 64MiB) it cannot grow, and says what the
// readers need, in its log and in stats.json's cache_short.
func TestCacheGrowsForReaders(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "text.bin")
	require.NoError(t, os.WriteFile(src, corpus.Text(rand.New(rand.NewPCG(5, 1)), 256<<20), 0o644))
	ds := filepath.Join(dir, "ds")
	mustRun(t, "pack", "--format", "raw", "--record-size", "4096", "--block-size", "16MiB", "--compress", "zstd:1", src, ds)
	require.NoError(t, os.Remove(src))
	type result struct {
		CapacityFirst int64 `json:"capacity_first"`
		Capacity      int64 `json:"capacity"`
		Short         int64 `json:"short"`
		Loads, Served int64
	}
	read := func(t *testing.T, m *mounted, grown int64, hold float64) result {
		out := pyCheckScript(t, "/usr/bin/python3", "testdata/readers_at_once.py", m.dir, "4", fmt.Sprint(grown), fmt.Sprint(hold))
		var res result
		require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(out, "ok ")), &res), out)
		return res
	}
	t.Run("grows", func(t *testing.T) {
		const budget = 192 << 20
		m := mount(t, ds, "--cache-size", "192MiB", "--readahead", "16MiB")
		res := read(t, m, 128<<20, 0)
		t.Logf("cache %d MiB -> %d MiB; epochs 1-3: %.2f bytes loaded a byte served", res.CapacityFirst>>20, res.Capacity>>20,
			float64(res.Loads)/float64(res.Served))
		assert.Greater(t, res.Capacity, int64(128<<20), "the cache grew for four readers")
		assert.LessOrEqual(t, res.Capacity, int64(budget), "within the budget")
		assert.Zero(t, res.Short, "stats.json: the cache holds them")
		assert.Contains(t, m.stderr.String(), "readers at 4 places of the order at once: cache")
		assert.Contains(t, m.stderr.String(), "blocks resident in the kernel's page cache")
		assert.LessOrEqual(t, float64(res.Loads), 1.15*float64(res.Served), "each byte loaded about once")
		hwm := peakRSS(t, m.cmd.Process.Pid) << 10
		decode := stack.DecodeMemory(layout.DefaultFrame)
		t.Logf("daemon peak RSS %d MiB; budget 192 MiB, decompression %d MiB", hwm>>20, decode>>20)
		assert.LessOrEqual(t, hwm, budget+decode+64<<20, "peak RSS: budget + decompression + 64 MiB")
	})
	t.Run("says what readers need", func(t *testing.T) {
		m := mount(t, ds, "--cache-size", "64MiB", "--readahead", "16MiB")
		res := read(t, m, 0, 4.5)
		assert.Equal(t, res.CapacityFirst, res.Capacity, "no room to grow")
		assert.Contains(t, m.stderr.String(), "readers at 4 places of the order at once need a cache of 160 MiB (the windows of 32 MiB they read and one more), more than the budget of 64 MiB allows (--cache-size)")
		assert.Contains(t, m.stderr.String(), "frames decompressed again")
		assert.InDelta(t, 160<<20, res.Capacity+res.Short, 1<<20, "stats.json's cache_short: what they need beyond the cache")
	})
}
