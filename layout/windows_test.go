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
	assert.ErrorContains(t, err, "segment starts must be a 1-D .npy of integers (int32 or int64)")
}

// TestReadSegmentsAsPeopleWriteThem: int32 starts, unsorted maps and a top-level list are
// read; ends that look exclusive and JSON of the wrong shape get a message in the user's terms.
func TestReadSegmentsAsPeopleWriteThem(t *testing.T) {
	dir := t.TempDir()
	var starts []byte
	for _, s := range []uint32{40, 0, 75} {
		starts = binary.LittleEndian.AppendUint32(starts, s)
	}
	i4 := filepath.Join(dir, "starts32.npy")
	require.NoError(t, os.WriteFile(i4, npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", starts), 0o644))
	segs, err := ReadSegments(i4, 100)
	require.NoError(t, err)
	assert.Equal(t, []Segment{{0, 39}, {40, 74}, {75, 99}}, segs, "int32 starts, sorted")

	for body, want := range map[string][]Segment{
		`{"index_map": [{"start_row": 50, "end_row": 99}, {"start_row": 0, "end_row": 49}]}`: {{0, 49}, {50, 99}},
		`[{"start_row": 10, "end_row": 19}, {"start_row": 0, "end_row": 9}]`:                 {{0, 9}, {10, 19}},
	} {
		p := filepath.Join(dir, "ok.json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		segs, err := ReadSegments(p, 100)
		require.NoError(t, err, body)
		assert.Equal(t, want, segs, body)
	}

	p := filepath.Join(dir, "list.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"index_map": {"start_row": 0}}`), 0o644))
	_, err = ReadSegments(p, 100)
	assert.ErrorContains(t, err, "index_map is a JSON object where a list was expected")

	for segs, want := range map[*[]Segment]string{
		{{0, 50}, {50, 99}}:  "segment 1 [50, 99] starts on row 50, the last row of segment 0 [0, 50]; end_row is inclusive",
		{{0, 49}, {50, 100}}: "passes the end of the file (100 rows): the last is row 99; end_row is inclusive",
		{{0, 60}, {50, 99}}:  "segment 1 [50, 99] overlaps segment 0 [0, 60]: segments must not overlap",
	} {
		assert.ErrorContains(t, checkSegments("m.json", *segs, 100), want)
	}
}
