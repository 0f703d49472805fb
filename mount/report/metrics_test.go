package report

import (
	"encoding/json"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsFromStats scrapes the registry of a mount whose snapshot is a mixture's stats.json
// (testdata/stats/mixture-store.json): the counters are stats.json's, and the store's and
// disk cache's carry the index of the source they are of.
func TestMetricsFromStats(t *testing.T) {
	var s Stats
	require.NoError(t, json.Unmarshal(readGolden(t, "mixture-store"), &s))
	m := NewMetrics(1024)
	m.Snapshot = func() Stats { return s }
	fams, err := m.reg.Gather()
	require.NoError(t, err)
	got := map[string]map[string]float64{} // name -> labels -> value
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			key := ""
			for _, l := range mt.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			if got[f.GetName()] == nil {
				got[f.GetName()] = map[string]float64{}
			}
			got[f.GetName()][key] = value(mt)
		}
	}
	assert.Equal(t, map[string]float64{"file=data,": 1 << 20, "file=ids,": 4096, "file=offsets,": 512, "file=source,": 1024},
		got["blockfs_read_bytes_total"])
	assert.Equal(t, map[string]float64{"": 1024}, got["blockfs_read_records_total"])
	assert.Equal(t, map[string]float64{"": 10}, got["blockfs_cache_hits_total"])
	assert.Equal(t, map[string]float64{"": 6 << 20}, got["blockfs_source_read_bytes_total"])
	assert.Equal(t, map[string]float64{"": 1}, got["blockfs_open_readers"])
	assert.Equal(t, map[string]float64{"": 12}, got["blockfs_page_cache_drops_total"])
	assert.Equal(t, map[string]float64{"": 0.75}, got["blockfs_page_cache_drop_seconds_total"])
	assert.Equal(t, map[string]float64{"": 1}, got["blockfs_page_cache_drops_skipped_total"])
	assert.Equal(t, map[string]float64{"source=1,": 12}, got["blockfs_store_requests_total"], "only source 1 is in a store")
	assert.Equal(t, 1.0, got["blockfs_store_errors_total"]["kind=throttled,source=1,"])
	assert.Equal(t, map[string]float64{"source=1,": 4}, got["blockfs_disk_cache_hits_total"])
	assert.Equal(t, map[string]float64{"source=1,": 5 << 20}, got["blockfs_disk_cache_bytes"])
	// Every source has its loads, local ones too (issue 39: only store and disk cache series had
	// a source label).
	assert.Equal(t, map[string]float64{"name=images,source=0,": 4, "name=text,source=1,": 2}, got["blockfs_source_loads_total"])
	assert.Equal(t, map[string]float64{"name=images,source=0,": 4 << 20, "name=text,source=1,": 2 << 20}, got["blockfs_source_loaded_bytes_total"])
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return -1
}
