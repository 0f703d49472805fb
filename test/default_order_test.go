package test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The default order over data stored in order (issue 25's floors), read from real mounts of
// sparse files: the .ids files say the order without reading any data.

// TestDefaultOrderTimeSeries: a seed-003-shaped time series served in place with windows (404
// entities of uneven length in a 4 GiB file, an index_map of segments, windows of 128 rows at
// stride 64) and default flags. A batch of 256 must draw from at least 0.7x the entities a
// uniform shuffle's batch does (before the automatic order: 1 entity against 178).
func TestDefaultOrderTimeSeries(t *testing.T) {
	requireFUSE(t)
	const entities, cols, L, S, batch = 404, 8, 128, 64, 256
	rowBytes := int64(cols * 4)
	rows := int64(4<<30) / rowBytes
	src := sparseFile(t, "series.bin", rows*rowBytes)
	// Entity lengths vary by up to 4x, as sensors and sessions do.
	rng := rand.New(rand.NewPCG(3, 3))
	weights := make([]float64, entities)
	var sum float64
	for i := range weights {
		weights[i] = 1 + 3*rng.Float64()
		sum += weights[i]
	}
	type seg struct {
		Start int64 `json:"start_row"`
		End   int64 `json:"end_row"`
	}
	segs := make([]seg, entities)
	var at float64
	for i, w := range weights {
		segs[i] = seg{int64(at / sum * float64(rows)), int64((at+w)/sum*float64(rows)) - 1}
		at += w
	}
	segs[entities-1].End = rows - 1
	meta, err := json.Marshal(map[string]any{"index_map": segs})
	require.NoError(t, err)
	segFile := filepath.Join(t.TempDir(), "meta.json")
	require.NoError(t, os.WriteFile(segFile, meta, 0o644))

	m := mount(t, src, "--dtype", "<f4", "--shape", "8", "--window", "128", "--stride", "64", "--segments", segFile)
	order := mountOrder(t, m)
	assert.True(t, order.Auto)
	t.Logf("order: mix %d (%s)", order.Mix, order.Why)

	starts := make([]int64, entities)
	windows := make([]float64, entities)
	var total float64
	for i, s := range segs {
		starts[i] = s.Start
		windows[i] = float64((s.End-s.Start+1-L)/S + 1)
		total += windows[i]
	}
	entity := func(row uint64) int {
		return sort.Search(entities, func(i int) bool { return starts[i] > int64(row) }) - 1
	}
	got := meanDistinctPerBatch(t, m.path("epoch-0000.ids"), batch, 200, entity)
	var uniform float64 // E[distinct entities in a uniform batch of 256]
	for _, w := range windows {
		uniform += 1 - math.Pow(1-w/total, batch)
	}
	t.Logf("entities per batch of %d: %.1f by default, %.1f for a uniform shuffle (%.2fx)", batch, got, uniform, got/uniform)
	assert.GreaterOrEqual(t, got, 0.7*uniform)
}

// TestDefaultOrderTokens: nanoGPT's train.bin (120 MB of uint16 tokens) served in place as
// USAGE says, windows of 1025 tokens at stride 1024, default flags: batches of 64 draw from at
// least 0.7x the 1 MiB stretches of the file a uniform shuffle's do (before: one 16 MiB block
// of 8 per batch).
func TestDefaultOrderTokens(t *testing.T) {
	requireFUSE(t)
	const tokens, batch = 60_000_000, 64
	src := sparseFile(t, "train.bin", tokens*2)
	m := mount(t, src, "--dtype", "uint16", "--window", "1025", "--stride", "1024")
	order := mountOrder(t, m)
	t.Logf("order: mix %d (%s)", order.Mix, order.Why)
	stretches := float64(tokens*2) / (1 << 20)
	stretch := func(row uint64) int { return int(row * 2 >> 20) }
	got := meanDistinctPerBatch(t, m.path("epoch-0000.ids"), batch, 500, stretch)
	uniform := stretches * (1 - math.Pow(1-1/stretches, batch))
	t.Logf("1 MiB stretches per batch of %d: %.1f by default, %.1f for a uniform shuffle (%.2fx)", batch, got, uniform, got/uniform)
	assert.GreaterOrEqual(t, got, 0.7*uniform)
}

// orderFacts is info.json's "order".
type orderFacts struct {
	Mix      int     `json:"mix"`
	Auto     bool    `json:"auto"`
	InOrder  bool    `json:"in_order"`
	Why      string  `json:"why"`
	Spread   float64 `json:"spread"`
	Uniform  float64 `json:"uniform_spread"`
	Warning  string  `json:"warning"`
	Versions []int   `json:"versions"`
}

func mountOrder(t *testing.T, m *mounted) orderFacts {
	raw, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	var info struct {
		Order orderFacts `json:"order"`
	}
	require.NoError(t, json.Unmarshal(raw, &info))
	return info.Order
}

// meanDistinctPerBatch reads the first batches of an epoch's .ids file through the mount and
// returns the mean number of distinct groups (group of an id) per batch.
func meanDistinctPerBatch(t *testing.T, ids string, batch, batches int, group func(uint64) int) float64 {
	f, err := os.Open(ids)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 8*batch*batches)
	n, err := f.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, len(buf), n, "the epoch holds %d batches", batches)
	var sum float64
	for b := 0; b < batches; b++ {
		seen := map[int]bool{}
		for i := 0; i < batch; i++ {
			seen[group(binary.LittleEndian.Uint64(buf[8*(b*batch+i):]))] = true
		}
		sum += float64(len(seen))
	}
	return sum / float64(batches)
}
