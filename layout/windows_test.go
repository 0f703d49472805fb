package layout

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadSegments reads both segment formats: a JSON index_map (other keys ignored) and a .npy
// of int64 start rows, whose segments end where the next starts; bad files are one error each.
func TestReadSegments(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "meta.json")
	require.NoError(t, os.WriteFile(js, []byte(`{"features": 3, "index_map": [{"id": "a", "start_row": 0, "end_row": 9}, {"start_row": 12, "end_row": 30}]}`), 0o644))
	segs, err := ReadSegments(js, 100)
	require.NoError(t, err)
	assert.Equal(t, []Segment{{0, 9}, {12, 30}}, segs)

	var starts []byte
	for _, s := range []uint64{0, 40, 75} {
		starts = binary.LittleEndian.AppendUint64(starts, s)
	}
	npy := filepath.Join(dir, "starts.npy")
	require.NoError(t, os.WriteFile(npy, npyBytes(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", starts), 0o644))
	segs, err = ReadSegments(npy, 100)
	require.NoError(t, err)
	assert.Equal(t, []Segment{{0, 39}, {40, 74}, {75, 99}}, segs)

	for body, want := range map[string]string{
		`{"index_map": [{"start_row": 1}]}`: "index_map entry 0 has no start_row or end_row",
		`{"entities": []}`:                  "the JSON has no index_map",
		`not json`:                          "not a .npy of segment starts, nor JSON with an index_map",
	} {
		p := filepath.Join(dir, "bad.json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, err := ReadSegments(p, 100)
		assert.ErrorContains(t, err, want, body)
	}
	f32 := filepath.Join(dir, "f32.npy")
	require.NoError(t, os.WriteFile(f32, npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", make([]byte, 8)), 0o644))
	_, err = ReadSegments(f32, 100)
	assert.ErrorContains(t, err, "segment starts must be a 1-D .npy of int64")
}
