package test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
)

// Datasets with fields (docs/FORMAT.md, "Datasets with fields"), packed from inputs written by
// Python (tarfile as webdataset writes shards) and Go (dstest.TFRecord) and read through a
// real mount: every field of every sample, in every epoch's one order, whole and in shards.

// writeShards writes n samples as WebDataset tar shards of per samples each with Python's
// tarfile: NNNNNN.jpg (random bytes of varied length), NNNNNN.cls (the class as text) and
// NNNNNN.json (an annotation of varied size). It returns the shards' glob and each sample's
// fields by key.
func writeShards(t *testing.T, dir string, n, per int) (string, []map[string][]byte) {
	t.Helper()
	script := fmt.Sprintf(`
import io, json, os, random, sys, tarfile
random.seed(7)
n, per, out = %d, %d, sys.argv[1]
for s in range((n + per - 1) // per):
    with tarfile.open(os.path.join(out, "shard-%%04d.tar" %% s), "w") as t:
        for i in range(s * per, min(n, (s + 1) * per)):
            key = "%%06d" %% i
            for ext, data in (("jpg", bytes(random.getrandbits(8) for _ in range(random.randint(1, 5000)))),
                              ("cls", str(i %% 10).encode()),
                              ("json", json.dumps({"id": i, "boxes": [[i, i]] * (i %% 7)}).encode())):
                ti = tarfile.TarInfo(key + "." + ext)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
`, n, per)
	cmd := exec.Command("/usr/bin/python3", "-c", script, dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	// Read the samples back with Python too, as the reference (not with blockfs's reader).
	ref := exec.Command("/usr/bin/python3", "-c", `
import glob, json, sys, tarfile, base64
out = {}
for p in sorted(glob.glob(sys.argv[1])):
    with tarfile.open(p) as t:
        for m in t.getmembers():
            k, ext = m.name.split(".", 1)
            out.setdefault(k, {})[ext] = base64.b64encode(t.extractfile(m).read()).decode()
json.dump([out[k] for k in sorted(out)], sys.stdout)
`, filepath.Join(dir, "shard-*.tar"))
	raw, err := ref.Output()
	require.NoError(t, err)
	var enc []map[string][]byte // encoding/json decodes base64 strings into []byte
	require.NoError(t, json.Unmarshal(raw, &enc))
	require.Len(t, enc, n)
	return filepath.Join(dir, "shard-*.tar"), enc
}

// fieldValues reads field f of epoch file base (in mnt, or a shard directory) as one value per
// record: through its .offsets, or cut every size bytes.
func fieldValues(t *testing.T, path string, size int) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out [][]byte
	if size > 0 {
		for off := 0; off < len(data); off += size {
			out = append(out, data[off:off+size])
		}
		return out
	}
	raw, err := os.ReadFile(path + ".offsets")
	require.NoError(t, err)
	for k := 0; k+16 <= len(raw); k += 8 {
		a, b := binary.LittleEndian.Uint64(raw[k:]), binary.LittleEndian.Uint64(raw[k+8:])
		out = append(out, data[a:b])
	}
	return out
}

func readIDs(t *testing.T, path string) []uint64 {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	ids := make([]uint64, len(raw)/8)
	for k := range ids {
		ids[k] = binary.LittleEndian.Uint64(raw[8*k:])
	}
	return ids
}

// fieldStats returns each field's bytes read into the cache (stats.json "sources").
func fieldStats(t *testing.T, m *mounted) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(m.path(".blockfs/stats.json"))
	require.NoError(t, err)
	var doc struct {
		Sources []struct {
			Name  string  `json:"name"`
			Bytes float64 `json:"bytes_read"`
		} `json:"sources"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	out := map[string]float64{}
	for _, s := range doc.Sources {
		out[s.Name] = s.Bytes
	}
	return out
}

func TestFieldsWebDataset(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	glob, samples := writeShards(t, dir, 1500, 400)
	ds := filepath.Join(dir, "ds")
	out := mustRun(t, "pack", "--block-size", "256KiB", glob, ds)
	assert.Contains(t, out, "packed 1500 samples with fields jpg (variable), cls (variable), json (variable) from 4 files")
	m := mount(t, ds, "--cache-size", "256MiB")
	var info struct {
		Kind    string `json:"kind"`
		Records uint64 `json:"records"`
		Fields  []struct {
			Name, Kind, File, Offsets string
		} `json:"fields"`
	}
	b, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	assert.Equal(t, "fields", info.Kind)
	assert.EqualValues(t, 1500, info.Records)
	require.Len(t, info.Fields, 3)
	assert.Equal(t, ".jpg", info.Fields[0].File)
	assert.Equal(t, ".jpg.offsets", info.Fields[0].Offsets)
	entries, err := os.ReadDir(m.dir)
	require.NoError(t, err)
	var first []string // os.ReadDir sorts by name
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "epoch-0000") {
			first = append(first, e.Name())
		}
	}
	assert.Equal(t, []string{"epoch-0000.cls", "epoch-0000.cls.offsets", "epoch-0000.ids", "epoch-0000.jpg", "epoch-0000.jpg.offsets", "epoch-0000.json", "epoch-0000.json.offsets"}, first)
	_, err = os.Stat(m.path("epoch-0000"))
	assert.True(t, os.IsNotExist(err), "a dataset with fields has no bare epoch file")

	before := fieldStats(t, m)
	// A reader of the labels reads no other field's blocks.
	ids := readIDs(t, m.path("epoch-0001.ids"))
	cls := fieldValues(t, m.path("epoch-0001.cls"), 0)
	after := fieldStats(t, m)
	assert.Equal(t, before["jpg"], after["jpg"], "reading cls read jpg's blocks")
	assert.Equal(t, before["json"], after["json"], "reading cls read json's blocks")
	assert.Positive(t, after["cls"]-before["cls"])
	require.Len(t, cls, 1500)
	seen := map[uint64]bool{}
	for p, id := range ids {
		seen[id] = true
		require.Equal(t, samples[id]["cls"], cls[p], "epoch 1 position %d", p)
	}
	assert.Len(t, seen, 1500, "every sample once")
	for _, e := range []int{0, 2} {
		name := fmt.Sprintf("epoch-%04d", e)
		ids := readIDs(t, m.path(name+".ids"))
		for _, f := range []string{"jpg", "cls", "json"} {
			vals := fieldValues(t, m.path(name+"."+f), 0)
			require.Len(t, vals, len(ids))
			for p, id := range ids {
				require.True(t, bytes.Equal(samples[id][f], vals[p]), "epoch %d field %s position %d (sample %d)", e, f, p, id)
			}
		}
		// Shard 1 of 3: the same records, from position 500.
		shard := filepath.Join(m.dir, "shard-1-of-3", name)
		sids := readIDs(t, shard+".ids")
		assert.Equal(t, ids[500:1000], sids)
		for p, v := range fieldValues(t, shard+".json", 0) {
			require.Equal(t, samples[sids[p]]["json"], v)
		}
	}
	// blockfs stats names each field's source.
	var view struct {
		Sources []struct{ Name string } `json:"sources"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustRun(t, "stats", "--once", "--interval", "200ms", m.dir)), &view))
	var srcs []string
	for _, s := range view.Sources {
		srcs = append(srcs, s.Name)
	}
	assert.Equal(t, []string{"jpg", "cls", "json"}, srcs)
	// dd reads a field like any file.
	ddOut, err := exec.Command("dd", "if="+m.path("epoch-0003.jpg"), "of=/dev/null", "bs=1M").CombinedOutput()
	require.NoError(t, err, "%s", ddOut)
	// verify checks every field; order --ids gives the mount's ids; info names the fields.
	assert.Contains(t, mustRun(t, "verify", ds), "ok")
	var lines []string
	for _, id := range readIDs(t, m.path("epoch-0002.ids")) {
		lines = append(lines, fmt.Sprint(id))
	}
	assert.Equal(t, strings.Join(lines, "\n")+"\n", mustRun(t, "order", ds, "--epoch", "2", "--ids"), "order of the data")
	assert.Equal(t, strings.Join(lines, "\n")+"\n", mustRun(t, "order", m.dir, "--epoch", "2", "--ids"), "order of the mount")
	assert.Contains(t, mustRun(t, "info", ds), "1500 samples with 3 fields")
	// The order is a shuffle: far from the input's.
	in := 0
	for p, id := range ids {
		if uint64(p) == id {
			in++
		}
	}
	assert.Less(t, in, 50, "epoch 1 keeps %d samples at their input position", in)
}

// writeTFRecord writes n records as a TFRecord file (dstest.TFRecord, which pack's tests hold
// to an independent writer in Python): record i is "record i " repeated 1 + i%13 times. With
// corrupt "data", record n/2's first byte is changed after its CRC32C was summed.
func writeTFRecord(t *testing.T, path string, n int, corrupt string) {
	t.Helper()
	recs := make([][]byte, n)
	bad := 0 // where record n/2's data starts in the file
	for i := range recs {
		recs[i] = bytes.Repeat([]byte(fmt.Sprintf("record %d ", i)), 1+i%13)
		if i < n/2 {
			bad += 16 + len(recs[i])
		}
	}
	file := dstest.TFRecord(recs)
	if corrupt == "data" {
		file[bad+12] = 'X'
	}
	require.NoError(t, os.WriteFile(path, file, 0o644))
}

func TestFieldsTFRecord(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	for _, name := range []string{"a.tfrecord", "b.tfrecord"} {
		writeTFRecord(t, filepath.Join(dir, name), 700, "")
	}
	ds := filepath.Join(dir, "ds")
	out := mustRun(t, "pack", filepath.Join(dir, "*.tfrecord"), ds)
	assert.Contains(t, out, "packed 1400 samples with fields record (variable) from 2 files")
	assert.Contains(t, out, "one field: a plain dataset")
	// One field keeps today's tree: a plain dataset (blockfs.json), epoch-NNNN and its
	// .offsets and .ids.
	assert.FileExists(t, filepath.Join(ds, "blockfs.json"))
	assert.NoFileExists(t, filepath.Join(ds, "blockfs-fields.json"))
	m := mount(t, ds)
	ids := readIDs(t, m.path("epoch-0000.ids"))
	vals := fieldValues(t, m.path("epoch-0000"), 0)
	_, err := os.Stat(m.path("epoch-0000.record"))
	assert.True(t, os.IsNotExist(err), "no field files for one field")
	require.Len(t, vals, 1400)
	for p, id := range ids {
		i := id % 700
		want := bytes.Repeat([]byte(fmt.Sprintf("record %d ", i)), int(1+i%13))
		require.Equal(t, want, vals[p], "position %d sample %d", p, id)
	}

	// A damaged record is refused at pack, in one line naming the file and the record, and
	// nothing is left behind.
	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.Mkdir(bad, 0o755))
	writeTFRecord(t, filepath.Join(bad, "c.tfrecord"), 100, "data")
	_, errs, code := run(t, "pack", filepath.Join(bad, "c.tfrecord"), filepath.Join(bad, "ds"))
	assert.NotZero(t, code)
	assert.Contains(t, errs, "c.tfrecord")
	assert.Contains(t, errs, "record 50")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line: %q", errs)
	left, _ := os.ReadDir(bad)
	assert.Len(t, left, 1, "pack left %v behind", left)
}

func TestFieldsRefusals(t *testing.T) {
	dir := t.TempDir()
	glob, _ := writeShards(t, dir, 20, 20)
	// A sample missing a field: refused unless --fill-missing.
	require.NoError(t, exec.Command("/usr/bin/python3", "-c", `
import io, sys, tarfile
with tarfile.open(sys.argv[1], "a") as t:
    ti = tarfile.TarInfo("000020.jpg"); ti.size = 3; t.addfile(ti, io.BytesIO(b"abc"))
`, filepath.Join(dir, "shard-0000.tar")).Run())
	_, errs, code := run(t, "pack", glob, filepath.Join(dir, "ds"))
	assert.NotZero(t, code)
	assert.Contains(t, errs, "000020")
	assert.Contains(t, errs, "--fill-missing")
	for _, cmd := range []string{"pack", "index"} {
		_, errs, code := run(t, cmd, "--fill-missing", glob, filepath.Join(dir, cmd+"-filled"))
		require.Equal(t, 0, code, errs)
		assert.Contains(t, errs, "note: filled 2 empty values (--fill-missing) of 21 samples: cls 1, json 1", "blockfs %s says what it filled", cmd)
	}
	// Flags that do not apply.
	_, errs, code = run(t, "pack", "--no-shuffle", glob, filepath.Join(dir, "ds2"))
	assert.Equal(t, 2, code, errs)
	_, errs, code = run(t, "pack", "--columns", "a", filepath.Join(dir, "x.bin"), filepath.Join(dir, "ds3"))
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "--columns")
	// A glob that matches nothing.
	_, errs, code = run(t, "pack", filepath.Join(dir, "none-*.tar"), filepath.Join(dir, "ds4"))
	assert.NotZero(t, code)
	assert.Contains(t, errs, "matches no file")
}

// TestFieldsSeriesSegmentsBy is seed 003 in one command: a Parquet time series written by
// DuckDB (test/testdata/parquet/make_series.js: 60 entities of 20 + (e*37 % 101) hourly rows,
// feature k of entity e's row t = e*1000 + t + k/4) is packed with --segments-by entity and
// mounted with --window: every window is 16 consecutive rows of one entity, every window the
// formula allows is there once, and a table not sorted by entity is refused.
func TestFieldsSeriesSegmentsBy(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	ds := filepath.Join(dir, "ds")
	out := mustRun(t, "pack", "--segments-by", "entity", "--columns", "entity,f0,f1,f2,f3", "testdata/parquet/series.parquet", ds)
	assert.Contains(t, out, "with 60 segments by entity")
	const L, S = 16, 4
	m := mount(t, ds, "--window", fmt.Sprint(L), "--stride", fmt.Sprint(S))
	// The reference: each entity's rows, and the windows they allow.
	type window struct{ entity, t int }
	want := map[uint64]window{} // global start row -> window
	row := 0
	for e := range 60 {
		n := 20 + (e*37)%101
		for s := 0; s+L <= n; s += S {
			want[uint64(row+s)] = window{e, s}
		}
		row += n
	}
	ids := readIDs(t, m.path("epoch-0000.ids"))
	data, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err)
	require.Len(t, ids, len(want))
	require.Len(t, data, len(want)*L*16)
	seen := map[uint64]bool{}
	for p, id := range ids {
		w, ok := want[id]
		require.True(t, ok, "position %d: window at row %d is not one the segments allow", p, id)
		require.False(t, seen[id], "window at row %d twice", id)
		seen[id] = true
		for r := range L {
			for k := range 4 {
				off := (p*L+r)*16 + 4*k
				got := math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
				require.Equal(t, float32(w.entity*1000+w.t+r)+float32(k)/4, got, "window %d (entity %d from t=%d) row %d feature %d", p, w.entity, w.t, r, k)
			}
		}
	}
	// Sorted by time, not by entity: refused with the way to sort it.
	_, errs, code := run(t, "pack", "--segments-by", "entity", "--columns", "entity,f0", "testdata/parquet/series_unsorted.parquet", filepath.Join(dir, "ds2"))
	assert.Equal(t, 1, code, errs)
	assert.Contains(t, errs, "must be sorted by entity")
	assert.Contains(t, errs, "ORDER BY entity")
	// Columns that cannot make rows: the timestamp is fine (int64) but of another dtype.
	_, errs, code = run(t, "pack", "--segments-by", "entity", "testdata/parquet/series.parquet", filepath.Join(dir, "ds3"))
	assert.NotZero(t, code)
	assert.Contains(t, errs, "one dtype")
}

// TestFieldsTablesMissing: a blockfs without blockfs-tables beside it (or on PATH) refuses a
// Parquet input in one line saying what is missing, and writes nothing.
func TestFieldsTablesMissing(t *testing.T) {
	dir := t.TempDir()
	lone := filepath.Join(dir, "blockfs")
	raw, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(lone, raw, 0o755))
	cmd := exec.Command(lone, "pack", "testdata/parquet/types.parquet", filepath.Join(dir, "ds"))
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin", "BLOCKFS_TABLES_BIN=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	require.Error(t, err)
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	assert.Contains(t, stderr.String(), "needs blockfs-tables beside blockfs")
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
	_, err = os.Stat(filepath.Join(dir, "ds"))
	assert.True(t, os.IsNotExist(err), "nothing written")
}

// TestFieldsOwnBlocks: a small fixed field beside a variable one is cut at blocks of its own
// (FORMAT.md), read by its samples' storage indices in the variable field's order: its values
// match the ids, and a reader of it reads only its own bytes, each once (with direct I/O, the
// daemon's disk reads are its files').
func TestFieldsOwnBlocks(t *testing.T) {
	requireFUSE(t)
	ds := filepath.Join(t.TempDir(), "ds")
	mustRun(t, "pack", "--quiet", "--columns", "row,img.bytes,name", "--block-size", "4KiB", "testdata/parquet/types.parquet", ds)
	man, err := os.ReadFile(filepath.Join(ds, "blockfs-fields.json"))
	require.NoError(t, err)
	var doc struct {
		Fields []struct{ Name, Blocks string } `json:"fields"`
	}
	require.NoError(t, json.Unmarshal(man, &doc))
	require.Len(t, doc.Fields, 3)
	assert.Equal(t, "own", doc.Fields[0].Blocks, "row: 8 B values")
	assert.Equal(t, "", doc.Fields[1].Blocks, "img.bytes: variable")
	var rowBytes int64
	files, err := filepath.Glob(filepath.Join(ds, "fields", "row", "blocks", "*"))
	require.NoError(t, err)
	for _, f := range files {
		st, err := os.Stat(f)
		require.NoError(t, err)
		rowBytes += st.Size()
	}
	require.EqualValues(t, 5000*8, rowBytes, "row's data files: %v", files)
	assert.Contains(t, mustRun(t, "verify", ds), "ok")

	m := mount(t, ds, "--cache-size", "64MiB", "--direct", "on")
	disk0 := diskRead(t, m.cmd.Process.Pid)
	before := fieldStats(t, m)
	for _, e := range []int{1, 2} {
		name := fmt.Sprintf("epoch-%04d", e)
		ids := readIDs(t, m.path(name+".ids"))
		rows := fieldValues(t, m.path(name+".row"), 8)
		require.Len(t, rows, 5000)
		for p, id := range ids {
			require.EqualValues(t, id, binary.LittleEndian.Uint64(rows[p]), "epoch %d position %d", e, p)
		}
		sids := readIDs(t, filepath.Join(m.dir, "shard-2-of-3", name+".ids"))
		for p, v := range fieldValues(t, filepath.Join(m.dir, "shard-2-of-3", name+".row"), 8) {
			require.EqualValues(t, sids[p], binary.LittleEndian.Uint64(v))
		}
	}
	after := fieldStats(t, m)
	assert.Equal(t, before["img.bytes"], after["img.bytes"], "reading row read img.bytes")
	assert.Equal(t, before["name"], after["name"], "reading row read name")
	assert.InDelta(t, float64(rowBytes), after["row"]-before["row"], 0.1*float64(rowBytes), "row's bytes into the cache over two epochs: once")
	disk := diskRead(t, m.cmd.Process.Pid) - disk0
	t.Logf("two epochs of row: %.0f B into the cache, %d B from the disk, for %d B of row", after["row"]-before["row"], disk, rowBytes)
	// The ids and row are all a pass reads: 5000 row values once and the ids it computes.
	assert.LessOrEqual(t, disk, int64(1.1*float64(rowBytes))+64<<10, "daemon disk reads %d B for %d B of row", disk, rowBytes)
}

// TestFieldsOneColumn: a table packed with one column keeps today's tree, a plain dataset of
// the column's dtype, whose epoch file is its values in the mount's order.
func TestFieldsOneColumn(t *testing.T) {
	requireFUSE(t)
	ds := filepath.Join(t.TempDir(), "ds")
	out := mustRun(t, "pack", "--columns", "row", "testdata/parquet/types.parquet", ds)
	assert.Contains(t, out, "one field: a plain dataset")
	assert.Contains(t, mustRun(t, "info", ds), "<i8")
	m := mount(t, ds)
	ids := readIDs(t, m.path("epoch-0001.ids"))
	rows := fieldValues(t, m.path("epoch-0001"), 8)
	require.Len(t, rows, 5000)
	for p, id := range ids {
		require.EqualValues(t, id, binary.LittleEndian.Uint64(rows[p]), "position %d", p)
	}
}
