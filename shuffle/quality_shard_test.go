package shuffle

import (
	"math"
	"testing"
)

// A shard's ids in one epoch and the next are different sets: the correlation counts the ids
// in both (it indexed past the table, or took an absent id's position as 0).
func TestPositionCorrelationOverCommonIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []uint64
		want float64
	}{
		{"dense, an id beyond b's", []uint64{10, 1, 2, 3}, []uint64{1, 2, 3, 0}, 1},
		{"dense, an id absent from b", []uint64{2, 0, 1, 3}, []uint64{0, 1, 3, 4}, 1},
		{"sparse ids", []uint64{1000, 1e6, 2e6, 3e6}, []uint64{1e6, 2e6, 3e6, 5}, 1},
		{"reversed", []uint64{1, 2, 3, 9}, []uint64{3, 2, 1, 8}, -1},
	} {
		if got := positionCorrelation(Sample{IDs: tc.a}, Sample{IDs: tc.b}); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := positionCorrelation(Sample{IDs: []uint64{1, 2}}, Sample{IDs: []uint64{3, 4}}); !math.IsNaN(got) {
		t.Errorf("no common ids: %v, want NaN", got)
	}
}
