package test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Shards served in place (docs/FORMAT.md, "Shards in place"): WebDataset tar shards written by
// Python's tarfile and TFRecord files framed by hand, indexed once (blockfs index, or by the
// mount) and mounted where they are: every value of every sample, in every epoch, is what
// Python reads from the shards, and what a mount of the same shards packed serves.

// checkSampleEpochs requires epochs es of the mount m of samples (by id) to hold every sample once
// with each field's value exact; fields empty: one field served as a plain dataset.
func checkSampleEpochs(t *testing.T, m *mounted, es []int, fields []string, want func(id uint64, field string) []byte, n int) {
	t.Helper()
	for _, e := range es {
		name := fmt.Sprintf("epoch-%04d", e)
		ids := readIDs(t, m.path(name+".ids"))
		require.Len(t, ids, n)
		seen := map[uint64]bool{}
		for _, id := range ids {
			seen[id] = true
		}
		require.Len(t, seen, n, "%s: every sample once", name)
		files := map[string]string{"": name}
		if len(fields) > 0 {
			files = map[string]string{}
			for _, f := range fields {
				files[f] = name + "." + f
			}
		}
		for f, file := range files {
			vals := fieldValues(t, m.path(file), 0)
			require.Len(t, vals, n)
			for p, id := range ids {
				require.True(t, bytes.Equal(want(id, f), vals[p]), "%s field %q position %d (sample %d)", name, f, p, id)
			}
		}
	}
}

func TestShardsInPlace(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	shards := filepath.Join(dir, "shards")
	require.NoError(t, os.Mkdir(shards, 0o755))
	glob, samples := writeShards(t, shards, 1200, 400)
	wds := func(id uint64, f string) []byte { return samples[id][f] }
	fields := []string{"jpg", "cls", "json"}

	idx := filepath.Join(dir, "idx")
	out := mustRun(t, "index", "--block-size", "64KiB", glob, idx)
	assert.Contains(t, out, "1200 samples of 3 webdataset shards")
	// The small fields are stored in the index (a reader of the labels reads the index's
	// bytes, not a disk request a sample); the images are read from the shards.
	assert.FileExists(t, filepath.Join(idx, "fields", "cls.values"))
	assert.FileExists(t, filepath.Join(idx, "fields", "json.values"))
	assert.NoFileExists(t, filepath.Join(idx, "fields", "jpg.values"))
	m := mount(t, idx, "--seed", "3", "--cache-size", "64MiB")
	checkSampleEpochs(t, m, []int{0, 1}, fields, wds, 1200)
	info := readWhole(t, m.path(".blockfs/info.json"), 1<<20)
	assert.Contains(t, string(info), `"kind": "fields"`)

	// The same shards mounted as a folder, indexed by the mount into --index: the same
	// index, so the same bytes; and the index is made again, not used, once a shard changes.
	idx2 := filepath.Join(dir, "idx2")
	m2 := mount(t, shards, "--index", idx2, "--seed", "3", "--cache-size", "64MiB")
	assert.FileExists(t, filepath.Join(idx2, "blockfs-index.json"))
	checkSampleEpochs(t, m2, []int{0, 1}, fields, wds, 1200)
	m2.stop()
	checkIndexParts(t, dir, glob, idx2)

	// An index of shards that changed is refused, in one line naming the shard.
	m.stop()
	shard := filepath.Join(shards, "shard-0001.tar")
	later := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(shard, later, later))
	_, errs, code := run(t, "mount", idx, filepath.Join(dir, "mnt"))
	assert.NotZero(t, code)
	assert.Contains(t, errs, "shard-0001.tar")
	assert.Contains(t, errs, "blockfs index")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line: %q", errs)

	// A value that changed in its shard with its time put back is EIO under --verify, never
	// other bytes.
	st, err := os.Stat(shard)
	require.NoError(t, err)
	mustRun(t, "index", "--force", "--block-size", "64KiB", glob, idx)
	raw, err := os.ReadFile(shard)
	require.NoError(t, err)
	at := bytes.Index(raw, samples[500]["jpg"]) + len(samples[500]["jpg"])/2 // inside a value
	require.Greater(t, at, 0)
	raw[at] ^= 0xff
	require.NoError(t, os.WriteFile(shard, raw, 0o644))
	require.NoError(t, os.Chtimes(shard, st.ModTime(), st.ModTime()))
	mv := mount(t, idx, "--verify", "--cache-size", "64MiB")
	bad := 0
	for _, f := range fields {
		if _, err := os.ReadFile(mv.path("epoch-0000." + f)); err != nil {
			assert.Contains(t, err.Error(), "input/output error")
			bad++
		}
	}
	assert.Positive(t, bad, "a changed value was served")
	mv.stop()

	// A damaged index (a value's place edited) is EIO too, with or without --verify.
	raw[at] ^= 0xff
	require.NoError(t, os.WriteFile(shard, raw, 0o644))
	require.NoError(t, os.Chtimes(shard, st.ModTime(), st.ModTime()))
	members := filepath.Join(idx, "fields", "jpg.members")
	mem, err := os.ReadFile(members)
	require.NoError(t, err)
	mem[8] ^= 0x10
	require.NoError(t, os.WriteFile(members, mem, 0o644))
	md := mount(t, idx, "--cache-size", "64MiB")
	_, err = os.ReadFile(md.path("epoch-0000.jpg"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "input/output error")
	checkSampleEpochs(t, md, []int{0}, []string{"cls"}, wds, 1200)
}

func TestShardsInPlaceTFRecord(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	tfr := filepath.Join(dir, "tfr")
	require.NoError(t, os.Mkdir(tfr, 0o755))
	for _, name := range []string{"a.tfrecord", "b.tfrecord"} {
		writeTFRecord(t, filepath.Join(tfr, name), 700, "")
	}
	want := func(id uint64, _ string) []byte {
		i := id % 700
		return bytes.Repeat([]byte(fmt.Sprintf("record %d ", i)), int(1+i%13))
	}
	idx := filepath.Join(dir, "idx")
	out := mustRun(t, "index", "--block-size", "16KiB", tfr, idx)
	assert.Contains(t, out, "1400 samples of 2 tfrecord shards")
	// One field: a plain dataset, as pack makes of it (epoch-NNNN, .offsets, .ids).
	m := mount(t, idx, "--seed", "5")
	checkSampleEpochs(t, m, []int{0, 1}, nil, want, 1400)

	// A source of a mixture: the TFRecord files in place (one field, a plain dataset) beside
	// the same files packed, each record's bytes its own.
	packed := filepath.Join(dir, "packed")
	mustRun(t, "pack", "--quiet", tfr, packed)
	mix := writeMixture(t, dir, "mix.json", fmt.Sprintf(`{"epoch_records": 1400, "sources": [{"data": %q, "weight": 0.5}, {"data": %q, "weight": 0.5}]}`, idx, packed))
	mm := mount(t, mix)
	ep := readMixEpoch(t, mm, "", 0)
	require.Len(t, ep.ids, 1400)
	count := [2]int{}
	for k, id := range ep.ids {
		count[ep.src[k]]++
		require.Equal(t, want(id, ""), ep.record(k, 0), "mixture record %d (source %d, id %d)", k, ep.src[k], id)
	}
	assert.Equal(t, [2]int{700, 700}, count)
	mm.stop()

	// Node-aware: 2 nodes of the files in place, each serving its parts; together every
	// record once an epoch, each its own bytes.
	seen := map[uint64]int{}
	for node := range 2 {
		mn := mount(t, idx, "--nodes", "2", "--node", fmt.Sprint(node), "--seed", "5")
		ids := readIDs(t, mn.path("epoch-0001.ids"))
		vals := fieldValues(t, mn.path("epoch-0001"), 0)
		require.Len(t, vals, len(ids))
		for p, id := range ids {
			seen[id]++
			require.Equal(t, want(id, ""), vals[p], "node %d position %d", node, p)
		}
		mn.stop()
	}
	require.Len(t, seen, 1400, "the nodes serve every record")
	for id, n := range seen {
		require.Equal(t, 1, n, "record %d served %d times", id, n)
	}

	// A damaged record is refused at index, in one line naming the file and the record, and
	// nothing is left behind.
	bad := filepath.Join(dir, "bad")
	require.NoError(t, os.Mkdir(bad, 0o755))
	writeTFRecord(t, filepath.Join(bad, "c.tfrecord"), 100, "data")
	_, errs, code := run(t, "index", filepath.Join(bad, "c.tfrecord"), filepath.Join(dir, "badidx"))
	assert.NotZero(t, code)
	assert.Contains(t, errs, "c.tfrecord")
	assert.Contains(t, errs, "record 50")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line: %q", errs)
	left, _ := os.ReadDir(dir)
	for _, e := range left {
		assert.NotContains(t, e.Name(), "badidx", "index left %s behind", e.Name())
	}
}

// TestS3ShardsInPlace serves WebDataset shards and a TFRecord file where they are in MinIO:
// indexed from the store (blockfs index, or by the mount into --index, with and without a
// disk cache), every value of two epochs exact, each byte read with If-Match on the ETag the
// index recorded; a shard replaced in the store is refused.
func TestS3ShardsInPlace(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	ep := "--endpoint=" + srv.endpoint()
	dir := t.TempDir()
	glob, samples := writeShards(t, dir, 900, 300)
	paths, err := filepath.Glob(glob)
	require.NoError(t, err)
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		srv.put("data", "wds/"+filepath.Base(p), raw)
	}
	writeTFRecord(t, filepath.Join(dir, "a.tfrecord"), 500, "")
	raw, err := os.ReadFile(filepath.Join(dir, "a.tfrecord"))
	require.NoError(t, err)
	srv.put("data", "tfr/a.tfrecord", raw)
	wds := func(id uint64, f string) []byte { return samples[id][f] }
	fields := []string{"jpg", "cls", "json"}

	idx := filepath.Join(dir, "idx")
	out := mustRun(t, "index", ep, "--block-size", "64KiB", "s3://data/wds/", idx)
	assert.Contains(t, out, "900 samples of 3 webdataset shards")
	m := mount(t, idx, ep, "--seed", "2", "--cache-size", "64MiB")
	checkSampleEpochs(t, m, []int{0, 1}, fields, wds, 900)
	// stats.json's "store" counts each field's requests to the store (a store each).
	var st struct {
		Store []*struct {
			Requests uint64 `json:"requests"`
		} `json:"store"`
	}
	require.NoError(t, json.Unmarshal(readWhole(t, m.path(".blockfs/stats.json"), 1<<20), &st))
	require.Len(t, st.Store, 3)
	assert.Positive(t, st.Store[0].Requests, "jpg's requests")
	m.stop()
	for _, extra := range [][]string{nil, {"--disk-cache", filepath.Join(t.TempDir(), "dc")}} {
		mi := mount(t, "s3://data/wds", append([]string{ep, "--index", filepath.Join(t.TempDir(), "ix"), "--cache-size", "64MiB"}, extra...)...)
		checkSampleEpochs(t, mi, []int{0, 1}, fields, wds, 900)
		mi.stop()
	}

	tidx := filepath.Join(dir, "tidx")
	mustRun(t, "index", ep, "--block-size", "8KiB", "s3://data/tfr", tidx)
	mt := mount(t, tidx, ep)
	checkSampleEpochs(t, mt, []int{0, 1}, nil, func(id uint64, _ string) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("record %d ", id)), int(1+id%13))
	}, 500)
	mt.stop()

	// A shard replaced in the store (another ETag) is refused, naming it.
	srv.put("data", "wds/"+filepath.Base(paths[1]), append([]byte(nil), raw[:4096]...))
	_, errs, code := run(t, "mount", ep, idx, filepath.Join(dir, "mnt"))
	assert.NotZero(t, code)
	assert.Contains(t, errs, filepath.Base(paths[1]))
	assert.Contains(t, errs, "blockfs index")
}

// TestShardsInPlaceLargeValuesAndLinks: values longer than one read of the shard (a 9 MiB
// video beside small ones) are served whole; shards reached through symbolic links (a cache's
// snapshot) are indexed as the files they name; an --index of other shards is made again for
// these, never served for them.
func TestShardsInPlaceLargeValuesAndLinks(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	blobs := filepath.Join(dir, "blobs")
	require.NoError(t, os.Mkdir(blobs, 0o755))
	script := `
import io, os, random, sys, tarfile
random.seed(5)
out = sys.argv[1]
for s in range(2):
    with tarfile.open(os.path.join(out, "blob-%d" % s), "w") as t:
        for i in range(6):
            k = s * 6 + i
            size = 9 << 20 if i == 2 else random.randint(1, 300000)
            pattern = bytes([(k * 7 + j) % 251 for j in range(1000)])
            for ext, data in (("mp4", (pattern * (size // 1000 + 1))[:size]), ("cls", b"%d" % k)):
                ti = tarfile.TarInfo("%04d.%s" % (k, ext))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
`
	out, err := exec.Command("/usr/bin/python3", "-c", script, blobs).CombinedOutput()
	require.NoError(t, err, "%s", out)
	snap := filepath.Join(dir, "snapshot")
	require.NoError(t, os.Mkdir(snap, 0o755))
	for s := range 2 {
		require.NoError(t, os.Symlink(filepath.Join(blobs, fmt.Sprintf("blob-%d", s)), filepath.Join(snap, fmt.Sprintf("train-%d.tar", s))))
	}
	want := map[string][][]byte{} // by field, by sample id
	big := 0
	for s := range 2 {
		raw, err := os.ReadFile(filepath.Join(blobs, fmt.Sprintf("blob-%d", s)))
		require.NoError(t, err)
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			v, err := io.ReadAll(tr)
			require.NoError(t, err)
			ext := h.Name[strings.LastIndex(h.Name, ".")+1:]
			want[ext] = append(want[ext], v)
			big = max(big, len(v))
		}
	}
	require.Equal(t, 9<<20, big, "a value of 9 MiB")
	idx := filepath.Join(dir, "idx")
	m := mount(t, filepath.Join(snap, "*.tar"), "--index", idx, "--cache-size", "128MiB")
	checkSampleEpochs(t, m, []int{0}, []string{"mp4", "cls"}, func(id uint64, f string) []byte { return want[f][id] }, 12)
	m.stop()
	raw, err := os.ReadFile(filepath.Join(idx, "blockfs-index.json"))
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"source": "`+blobs+`"`, "the files the links name")
	// verify reads each block whole: the 9 MiB value in one read.
	assert.Contains(t, mustRun(t, "verify", idx), "ok:")

	// The same --index for other shards (one of them): indexed again, these served.
	one := filepath.Join(dir, "one")
	require.NoError(t, os.Mkdir(one, 0o755))
	require.NoError(t, os.Symlink(filepath.Join(blobs, "blob-1"), filepath.Join(one, "x.tar")))
	m = mount(t, filepath.Join(one, "*.tar"), "--index", idx, "--cache-size", "128MiB")
	checkSampleEpochs(t, m, []int{0}, []string{"mp4", "cls"}, func(id uint64, f string) []byte { return want[f][6+id] }, 6)
	m.stop()
}

// mustGlob returns the files a pattern names, sorted.
func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	require.NoError(t, err)
	require.NotEmpty(t, m, pattern)
	return m
}

// checkIndexParts: blockfs index of the shards at glob is the index the mount made (made);
// one made in parts and merged is the same, byte for byte; a merge with a part missing, or of
// parts made over other shards, is refused.
func checkIndexParts(t *testing.T, dir, glob, made string) {
	again := filepath.Join(dir, "idx3")
	mustRun(t, "index", glob, again)
	a, _ := os.ReadFile(filepath.Join(made, "blockfs-index.json"))
	b, _ := os.ReadFile(filepath.Join(again, "blockfs-index.json"))
	require.Equal(t, string(a), string(b), "an index is a function of the shards")

	// An index made in parts (any order, anywhere) and merged is the one index of the shards;
	// a merge with a part missing is refused, naming it.
	parted := filepath.Join(dir, "parted")
	mustRun(t, "index", "--part", "1/3", glob, parted)
	_, errs, code := run(t, "index", "--merge", parted)
	assert.NotZero(t, code)
	assert.Contains(t, errs, "part 0 of 3 is missing")
	mustRun(t, "index", "--part", "2/3", glob, parted)
	mustRun(t, "index", "--part", "0/3", glob, parted)
	out := mustRun(t, "index", "--merge", parted)
	assert.Contains(t, out, "1200 samples of 3 webdataset shards")
	c, _ := os.ReadFile(filepath.Join(parted, "blockfs-index.json"))
	require.Equal(t, string(b), string(c), "an index merged from parts is the one index")
	for _, f := range []string{"jpg.offsets", "jpg.members", "cls.values", "json.members"} {
		x, _ := os.ReadFile(filepath.Join(again, "fields", f))
		y, _ := os.ReadFile(filepath.Join(parted, "fields", f))
		require.True(t, bytes.Equal(x, y), "%s of the merged index", f)
	}
	// A part indexed again after the shards changed (a shard added: the parts' shares move)
	// is refused at the merge, not indexed twice or left out.
	late := filepath.Join(dir, "late")
	require.NoError(t, os.MkdirAll(late, 0o755))
	for _, e := range mustGlob(t, glob) {
		require.NoError(t, os.Link(e, filepath.Join(late, filepath.Base(e))))
	}
	lateGlob := filepath.Join(late, "*.tar")
	mustRun(t, "index", "--part", "0/2", lateGlob, filepath.Join(dir, "lateidx"))
	extra := mustGlob(t, glob)[0]
	require.NoError(t, os.Link(extra, filepath.Join(late, "zz-"+filepath.Base(extra))))
	mustRun(t, "index", "--part", "1/2", lateGlob, filepath.Join(dir, "lateidx"))
	_, errs, code = run(t, "index", "--merge", filepath.Join(dir, "lateidx"))
	assert.NotZero(t, code)
	assert.Contains(t, errs, "the shards changed between the parts' runs; index every part again")
}
