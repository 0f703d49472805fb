package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/blockfs/blockfs/source/objstore"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/source/diskcache"
)

// testdata/stats holds stats.json as the daemon wrote it before Stats was typed (fs.Stats with
// untyped fields): a local dataset, one in an object store with a disk cache, and a mixture of
// two sources without and with (the second source only) a store and a disk cache. Stats must
// read and write each byte for byte, so that every reader of stats.json (blockfs stats, the
// Python package, the tests) sees the same keys and values.

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "stats", name+".json"))
	require.NoError(t, err)
	return b
}

func encodeStats(t *testing.T, s Stats) []byte {
	t.Helper()
	b, err := json.MarshalIndent(s, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

func TestStatsRoundTrip(t *testing.T) {
	for _, name := range []string{"local", "store", "mixture", "mixture-store"} {
		t.Run(name, func(t *testing.T) {
			want := readGolden(t, name)
			var s Stats
			require.NoError(t, json.Unmarshal(want, &s))
			assert.Equal(t, string(want), string(encodeStats(t, s)))

			// The same keys, at every level, through a generic decoding too.
			var a, b map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(want, &a))
			require.NoError(t, json.Unmarshal(encodeStats(t, s), &b))
			assert.Equal(t, len(a), len(b))
			for k := range a {
				assert.Contains(t, b, k)
			}
		})
	}
}

// sampleStats is the typed Stats the golden files hold (mixture.json with sources, store.json
// and local.json without).
func sampleStats() Stats {
	return Stats{
		Counters: bfs.Counters{DataServed: 1 << 20, IDsServed: 4096, OffsetsServed: 512, Reads: 300, ReadErrors: 1,
			ErrorsByKind: map[string]uint64{"changed": 1, "corrupt": 0},
			LastErrors: []ErrorStats{{File: "epoch-0000", Offset: 4096, Kind: "changed", Reason: "a dataset file changed under the mount",
				Count: 1, First: "2026-11-29T06:00:00Z", Latest: "2026-11-29T06:00:00Z"}},
			ReadsWaited: 20, WaitSeconds: 0.25, ReadSeconds: 1.5, ReaderSeconds: 2, Stall: 0.125, Uptime: 10.5,
			PID: 4242, RSS: 50 << 20, Goroutines: 17, OpenFDs: 12,
			Readers: []ReaderStats{{ID: 3, File: "epoch-0000", PID: 99, Size: 1 << 21, Position: 1 << 20, Bytes: 1 << 20,
				Reads: 8, ReadsWaited: 2, WaitSeconds: 0.25, ReadSeconds: 0.5, OpenSeconds: 3, Active: 2, Stall: 0.125}},
			PageCacheDrops: 12, PageCacheDropSeconds: 0.75, PageCacheDropsSkipped: 1},
		Cache: cache.Stats{Hits: 10, Misses: 5, Merged: 2, ReadaheadHits: 3, ReadaheadWasted: 1, PrefetchDropped: 4,
			DiskReads: 6, DiskBytes: 6 << 20, Evictions: 9, Overflow: 1, CachedBytes: 8 << 20, CapacityBytes: 64 << 20,
			PageSize: 1 << 20},
	}
}

func sampleStore() (*objstore.Counters, *diskcache.Stats) {
	return &objstore.Counters{Requests: 12, Retries: 2, Errors: map[string]uint64{"throttled": 1, "server": 1, "timeout": 0,
			"network": 0, "client": 0, "other": 0}},
		&diskcache.Stats{Hits: 4, Fetches: 6, FetchedBytes: 6 << 20, Evicted: 1, Used: 5 << 20, Files: 5}
}

func TestStatsTypedShapes(t *testing.T) {
	local := sampleStats()
	local.Cache.BytesServed = 777 // not in stats.json: bytes_served is the FUSE layer's
	assert.Equal(t, string(readGolden(t, "local")), string(encodeStats(t, local)))
	assert.Equal(t, []*objstore.Counters{nil}, local.Stores())

	one := sampleStats()
	one.Store, one.DiskCache = sampleStore()
	assert.Equal(t, string(readGolden(t, "store")), string(encodeStats(t, one)), "one dataset's store and disk cache are objects")
	assert.Equal(t, []*objstore.Counters{one.Store}, one.Stores())
	assert.Equal(t, []*diskcache.Stats{one.DiskCache}, one.DiskCaches())

	mix := sampleStats()
	mix.SourceServed = 1024
	mix.Sources = []SourceStats{{Index: 0, Name: "images", Reads: 4, BytesRead: 4 << 20}, {Index: 1, Name: "text", Reads: 2, BytesRead: 2 << 20}}
	assert.Equal(t, string(readGolden(t, "mixture")), string(encodeStats(t, mix)), "no source in a store: no store key")

	mix.Sources[1].Store, mix.Sources[1].DiskCache = sampleStore()
	assert.Equal(t, string(readGolden(t, "mixture-store")), string(encodeStats(t, mix)), "a mixture's are lists by source")

	var back Stats
	require.NoError(t, json.Unmarshal(readGolden(t, "mixture-store"), &back))
	assert.Equal(t, mix, back)
	assert.Nil(t, back.Store, "a mixture's stores are its sources'")
	assert.Equal(t, []*objstore.Counters{nil, mix.Sources[1].Store}, back.Stores())
	assert.Equal(t, []*diskcache.Stats{nil, mix.Sources[1].DiskCache}, back.DiskCaches())
}

func TestStatsDecodeErrors(t *testing.T) {
	var s Stats
	err := json.Unmarshal([]byte(`{"store": [null, {"requests": 1}], "sources": [{"index": 0, "name": "a"}]}`), &s)
	assert.ErrorContains(t, err, "store: a list of 2 for 1 sources")
	err = json.Unmarshal([]byte(`{"disk_cache": {"hits": "x"}}`), &s)
	assert.ErrorContains(t, err, "disk_cache")
}
