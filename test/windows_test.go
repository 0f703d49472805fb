package test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWindowsMount: a time series (a 2-D .npy of float32 rows and a metadata.json whose
// index_map lists entities) mounted with --window, --stride and --segments. Every window of an
// epoch is the file's rows[s:s+L] for its id s, the ids are exactly the valid starts (none
// crosses an entity), shard files partition the epoch, blockfs order equals the mount, a
// remount gives the same bytes, and info.json describes the windows.
func TestWindowsMount(t *testing.T) {
	const rows, cols, L, S = 3000, 16, 50, 7
	dir := t.TempDir()
	npy := float32Npy(t, dir, rows, cols, func(r, c int) float32 { return float32(r*cols + c) })
	raw, err := os.ReadFile(npy)
	require.NoError(t, err)
	data := raw[len(raw)-rows*cols*4:]
	type ent struct {
		Start int `json:"start_row"`
		End   int `json:"end_row"`
		Name  string
	}
	ents := []ent{{0, 999, "a"}, {1000, 1040, "too short"}, {1041, 2400, "b"}, {2401, 2999, "c"}}
	meta, err := json.Marshal(map[string]any{"index_map": ents, "features": cols})
	require.NoError(t, err)
	seg := filepath.Join(dir, "metadata.json")
	require.NoError(t, os.WriteFile(seg, meta, 0o644))
	var want []uint64
	for _, e := range ents {
		for s := e.Start; s+L-1 <= e.End; s += S {
			want = append(want, uint64(s))
		}
	}
	flags := []string{"--window", strconv.Itoa(L), "--stride", strconv.Itoa(S), "--segments", seg, "--block-size", "64KiB", "--seed", "2"}
	m := mount(t, npy, flags...)
	epoch, err := os.ReadFile(m.path("epoch-0001"))
	require.NoError(t, err)
	idsRaw, err := os.ReadFile(m.path("epoch-0001.ids"))
	require.NoError(t, err)
	win := L * cols * 4
	require.Len(t, epoch, len(want)*win)
	var got []uint64
	for k := 0; k < len(want); k++ {
		s := binary.LittleEndian.Uint64(idsRaw[8*k:])
		require.True(t, bytes.Equal(data[int(s)*cols*4:int(s)*cols*4+win], epoch[k*win:(k+1)*win]), "window %d starts at row %d", k, s)
		got = append(got, s)
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	assert.Equal(t, want, got, "exactly the valid starts, each once")

	var shards []byte
	for r := 0; r < 3; r++ {
		b, err := os.ReadFile(m.path("shard-" + strconv.Itoa(r) + "-of-3/epoch-0001"))
		require.NoError(t, err)
		shards = append(shards, b...)
	}
	assert.Equal(t, epoch[:len(want)/3*3*win], shards, "shards partition the epoch")

	order := strings.Fields(mustRun(t, append([]string{"order", "--ids", "--epoch", "1", npy}, flags...)...))
	require.Len(t, order, len(want))
	for k, s := range order {
		require.Equal(t, strconv.FormatUint(binary.LittleEndian.Uint64(idsRaw[8*k:]), 10), s, "blockfs order at %d", k)
	}
	var info map[string]any
	b, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	assert.EqualValues(t, L, info["window"])
	assert.EqualValues(t, S, info["stride"])
	assert.EqualValues(t, 4, info["segments"])
	assert.EqualValues(t, len(want), info["windows"])
	assert.EqualValues(t, []any{float64(L), float64(cols)}, info["shape"])

	m.stop()
	m2 := mountAt(t, npy, m.dir, flags...)
	again, err := os.ReadFile(m2.path("epoch-0001"))
	require.NoError(t, err)
	assert.Equal(t, sum(epoch), sum(again), "the same bytes after a remount")
}

// TestWindowRefusals: each bad use of --window is one line with what to change.
func TestWindowRefusals(t *testing.T) {
	dir := t.TempDir()
	npy := float32Npy(t, dir, 100, 4, func(r, c int) float32 { return float32(r) })
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"index_map": [{"start_row": 50, "end_row": 99}, {"start_row": 0, "end_row": 60}]}`), 0o644))
	pk := packRaw(t, 16, "64KiB")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--window", "0", npy}, 2, "--window 0: give the rows per window, from 1 to"},
		{[]string{"--window", "101", npy}, 1, "no segment holds a window of 101 rows (the longest has 100); lower --window"},
		{[]string{"--window", "5", "--segments", bad, npy}, 1, "segment 1 [50, 99] overlaps segment 0 [0, 60]: segments must not overlap"},
		{[]string{"--stride", "3", npy}, 2, "--stride and --segments go with --window"},
		{[]string{"--window", "5", pk.dir}, 1, "windows need rows in stored order, and pack pre-shuffled these; pack the source again with --no-shuffle, or serve the .npy or raw file in place"},
	} {
		_, errs, code := run(t, append([]string{"order", "--ids"}, c.args...)...)
		assert.Equal(t, c.code, code, c.args)
		assert.Contains(t, errs, c.want, c.args)
		assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %s", errs)
	}
}

// TestWindowsOverPack: windows over a pack made with --no-shuffle, where windows run across its
// block files: every window is the rows it starts at, read through a real mount.
func TestWindowsOverPack(t *testing.T) {
	const n, L, S = 200, 5, 2
	p := packRaw(t, n, "64KiB", "--no-shuffle") // 16 rows of 4 KiB per block file
	m := mount(t, p.dir, "--window", strconv.Itoa(L), "--stride", strconv.Itoa(S), "--block-size", "64KiB", "--seed", "4")
	epoch, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err)
	ids, err := os.ReadFile(m.path("epoch-0000.ids"))
	require.NoError(t, err)
	rows := bytes.Join(p.records, nil)
	win := L * recordSize
	want := (n-L)/S + 1
	require.Len(t, epoch, want*win)
	crossing := 0
	for k := 0; k < want; k++ {
		s := int(binary.LittleEndian.Uint64(ids[8*k:]))
		require.Equal(t, rows[s*recordSize:s*recordSize+win], epoch[k*win:(k+1)*win], "window %d at row %d", k, s)
		if s/16 != (s+L-1)/16 {
			crossing++
		}
	}
	assert.Positive(t, crossing, "some windows run across two block files")

	// --dtype and --shape type the pack's raw rows as they type a file in place: the windows
	// are then arrays of L rows of that shape; a type of another size is refused.
	mt := mount(t, p.dir, "--window", strconv.Itoa(L), "--stride", strconv.Itoa(S), "--seed", "4", "--dtype", "uint32", "--shape", "1024")
	var info struct {
		DType string  `json:"dtype"`
		Shape []int64 `json:"shape"`
	}
	b, err := os.ReadFile(mt.path(".blockfs/info.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	assert.Equal(t, "<u4", info.DType)
	assert.Equal(t, []int64{L, 1024}, info.Shape)
	typed, err := os.ReadFile(mt.path("epoch-0000"))
	require.NoError(t, err)
	assert.Len(t, typed, want*win, "the same windows")
	_, errs, code := run(t, "info", "--window", "5", "--dtype", "float64", "--shape", "3", p.dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "--dtype <f8 and --shape [3] make records of 24 bytes; this dataset's are 4096 bytes")
}
