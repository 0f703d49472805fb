package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/mount/report"
)

// TestStatsViewCacheShort: the live view warns while the readers at once want more cache than
// the budget allows (stats.json's cache_short), and not otherwise.
func TestStatsViewCacheShort(t *testing.T) {
	a := report.Stats{Cache: cache.Stats{CapacityBytes: 64 << 20}}
	b := a
	b.Cache.Short = 96 << 20
	short := interval(a, b, time.Second, 0)
	assert.Equal(t, int64(96<<20), short.CacheShort)
	assert.Contains(t, render("/mnt", short), "warning     the readers at once want 96 MiB more cache than the budget allows: raise --cache-size")
	assert.NotContains(t, render("/mnt", interval(a, a, time.Second, 0)), "warning")
}
