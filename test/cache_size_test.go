package test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

// A --cache-size given without --readahead is not refused for the default readahead's sake:
// the readahead is lowered to leave half of the cache beside the window (it was refused at 64
// MiB, "needs 65 MiB", a 64 MiB default readahead plus a block), and the epoch is exact.
func TestCacheSizeLowersDefaultReadahead(t *testing.T) {
	p := packRaw(t, 2048, "1MiB") // 8 MiB, 8 blocks
	m := mount(t, p.dir, "--seed", "3", "--cache-size", "16MiB")
	raw, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	var info struct {
		Readahead int64 `json:"readahead"`
		CacheSize int64 `json:"cache_size"`
	}
	require.NoError(t, json.Unmarshal(raw, &info))
	assert.LessOrEqual(t, info.Readahead, int64(8<<20), "half the cache at most, beside the window")
	assert.GreaterOrEqual(t, info.Readahead, int64(4<<20), "at least one cache load")
	assert.LessOrEqual(t, info.CacheSize, int64(16<<20))

	d := dstest.FromDir(t, p.dir, p.records)
	opt := shuffle.Options{Seed: 3, Epoch: 0, Mode: shuffle.Full, Mix: 1}
	want, _, _ := d.Epoch(opt, 0, 2048)
	got, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err)
	require.Equal(t, sum(want), sum(got))

	// A readahead the user gives is kept, and a cache too small for it refused, as before.
	_, errs, code := run(t, "mount", "--cache-size", "16MiB", "--readahead", "64MiB", p.dir, t.TempDir())
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--cache-size 16 MiB is too small")
}
