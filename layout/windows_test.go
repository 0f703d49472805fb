package layout

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestReadSegmentsLimits: a segment map that is not a regular file is refused at once, without
// waiting for a FIFO's writer or reading /dev/zero on (it used to grow 192 MB -> 1 GB in 6 s),
// and so is one that lists more than MaxSegments segments; JSON is decoded as a stream (other
// keys skipped, however large), with its mistakes said in the user's terms.
func TestReadSegmentsLimits(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for path, want := range map[string]string{
		fifo:        fifo + ": a named pipe (FIFO), not a regular file",
		"/dev/zero": "/dev/zero: a character device, not a regular file",
		dir:         dir + ": a directory, not a regular file",
	} {
		start := time.Now()
		_, err := ReadSegments(path, 100)
		assert.ErrorIs(t, err, ErrFormat)
		assert.ErrorContains(t, err, want)
		assert.Less(t, time.Since(start), time.Second, path)
	}

	many := filepath.Join(dir, "many.npy")
	n := MaxSegments + 1
	require.NoError(t, os.WriteFile(many, npyBytes(1, fmt.Sprintf("{'descr': '<i8', 'fortran_order': False, 'shape': (%d,), }", n), make([]byte, 8*n)), 0o644))
	_, err := ReadSegments(many, int64(n))
	assert.ErrorContains(t, err, "more than 1048576 segments")

	big := strings.Repeat(`{"deep": [1, 2, {"x": "y"}]}, `, 100000)
	for body, want := range map[string]any{
		`{"other": [` + big + `0], "index_map": [{"start_row": 3, "end_row": 4}], "more": {"a": null}}`: []Segment{{3, 4}},
		`{"index_map": null}`:                                "the JSON has no index_map list",
		`{"index_map": [{"start_row": 0, "end_row": 1}]} x`:  "not a .npy of segment starts, nor JSON",
		`{"index_map": [{"start_row": "0", "end_row": 1}]}`:  `index_map entry 0: start_row is a JSON string where a number was expected`,
		`{"index_map": [7]}`:                                 "index_map entry 0: the document is a JSON number where an object was expected",
		`{"index_map": [{"start_row": 0, "end_row": null}]}`: "index_map entry 0 has no start_row or end_row",
		`{"index_map": [{"start_row": 0, "end_row": 1}`:      "the JSON ends early",
		`"index_map"`: "the document is a JSON string where an object was expected",
	} {
		p := filepath.Join(dir, "m.json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		segs, err := ReadSegments(p, 100)
		if w, ok := want.([]Segment); ok {
			require.NoError(t, err)
			assert.Equal(t, w, segs)
			continue
		}
		assert.ErrorContains(t, err, want.(string), body[:min(len(body), 60)])
	}
}
