package test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMixtureCounts: two packed sources weighted 0.7/0.3 in epochs of 10000 records give
// exactly 7000 and 3000 records every epoch, every 1000 consecutive records hold each
// source's share to within one, and every record is its source's record at its id. The
// small source (3000 records for 7000 draws) repeats, each pass a new order; the large one
// (5000 for 3000) continues its order into the next epoch, every record once before any
// twice. The largest remainder method gives the records left over, ties to the lower index.
func TestMixtureCounts(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	srcs := []*mixSrc{rawSource(t, dir, "small", 0, 3000, 64), rawSource(t, dir, "large", 1, 5000, 64)}
	mix := writeMixture(t, dir, "mix.json", `{"epoch_records": 10000, "sources": [
		{"data": "small", "weight": 0.7},
		{"data": "large", "weight": 0.3}]}`)
	m := mount(t, mix, "--seed", "3")
	info := mixInfo(t, m)
	assert.Equal(t, json.Number("10000"), info["records"])
	assert.Equal(t, false, info["epoch_records_vary"])
	assert.Equal(t, json.Number("7000"), infoSource(t, info, 0)["records_per_epoch"])
	assert.Equal(t, json.Number("3000"), infoSource(t, info, 1)["records_per_epoch"])

	weights := []float64{0.7, 0.3}
	var small, large []uint64
	for e := range 3 {
		what := fmt.Sprintf("epoch %d", e)
		ep := readMixEpoch(t, m, "", e)
		require.Nil(t, ep.offs, "one record size: no .offsets")
		require.Equal(t, []int{7000, 3000}, ep.counts(2), what)
		checkRecords(t, ep, srcs, what)
		// Every window of 1000 consecutive records (a batch) holds each source's share.
		for s, w := range weights {
			lo, hi := int(1000*w+1e-9)-1, int(1000*w+1-1e-9)+1
			prefix := make([]int, len(ep.src)+1)
			for k, x := range ep.src {
				prefix[k+1] = prefix[k]
				if int(x) == s {
					prefix[k+1]++
				}
			}
			for a := 0; a+1000 <= len(ep.src); a++ {
				if c := prefix[a+1000] - prefix[a]; c < lo || c > hi {
					t.Fatalf("%s: records [%d, %d) hold %d of source %d; want %d to %d", what, a, a+1000, c, s, lo, hi)
				}
			}
		}
		small = append(small, ep.draws(0)...)
		large = append(large, ep.draws(1)...)
	}
	// 21000 draws of 3000 records: 7 passes, each a permutation, each a new order.
	checkPasses(t, small, 3000, "the small source")
	// 9000 draws of 5000 records: epoch 1 continues epoch 0's pass.
	checkPasses(t, large, 5000, "the large source")

	// The largest remainder: 1001 records at 0.5/0.3/0.2 are 500.5, 300.3, 200.2, so the
	// record left goes to source 0; 1000 at 1/1/1 leave one to the tie, the lowest index.
	for _, c := range []struct {
		text string
		want []int
	}{
		{`{"epoch_records": 1001, "sources": [{"data": "small", "weight": 0.5}, {"data": "large", "weight": 0.3}, {"data": "small", "weight": 0.2}]}`, []int{501, 300, 200}},
		{`{"epoch_records": 1000, "sources": [{"data": "large", "weight": 1}, {"data": "small", "weight": 1}, {"data": "large", "weight": 1}]}`, []int{334, 333, 333}},
	} {
		m := mount(t, writeMixture(t, dir, "rem.json", c.text))
		for e := range 2 {
			ep := readMixEpoch(t, m, "", e)
			require.Equal(t, c.want, ep.counts(3), "%s epoch %d", c.text, e)
		}
		m.stop()
	}
}

// TestMixtureRepeat: "repeat": "1/3" gives each record exactly once over three epochs;
// "repeat": 2.5 two and a half passes an epoch, each pass a permutation; and 2.5 passes of an
// odd-sized source (1001 records) make epochs of different sizes, which the files' sizes and
// info.json say.
func TestMixtureRepeat(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	srcs := []*mixSrc{rawSource(t, dir, "third", 0, 3000, 64), rawSource(t, dir, "even", 1, 1000, 64), rawSource(t, dir, "odd", 2, 1001, 64)}
	mix := writeMixture(t, dir, "mix.json", `{"sources": [
		{"data": "third", "repeat": "1/3"},
		{"data": "even", "repeat": 2.5},
		{"data": "odd", "repeat": 2.5}]}`)
	m := mount(t, mix, "--seed", "8")
	info := mixInfo(t, m)
	assert.Equal(t, true, info["epoch_records_vary"], "a fractional repeat of 1001 records varies the epoch")
	assert.Equal(t, json.Number("6002"), info["records"], "epoch 0's records")

	// c(e) = floor((e+1)*2.5*1001) - floor(e*2.5*1001): 2502, 2503, 2502, 2503.
	odd := []int{2502, 2503, 2502, 2503}
	draws := make([][]uint64, 3)
	for e := range 4 {
		what := fmt.Sprintf("epoch %d", e)
		want := []int{1000, 2500, odd[e]}
		total := int64(1000 + 2500 + odd[e])
		for suffix, size := range map[string]int64{"": 64 * total, ".ids": 8 * total, ".source": 2 * total} {
			st, err := os.Stat(m.path(fmt.Sprintf("epoch-%04d%s", e, suffix)))
			require.NoError(t, err)
			assert.Equal(t, size, st.Size(), "%s: epoch-%04d%s's size", what, e, suffix)
		}
		ep := readMixEpoch(t, m, "", e)
		require.Equal(t, want, ep.counts(3), what)
		checkRecords(t, ep, srcs, what)
		if e < 3 {
			for s := range 3 {
				draws[s] = append(draws[s], ep.draws(s)...)
			}
		}
	}
	// Over three epochs, repeat 1/3 gives every record exactly once.
	checkPasses(t, draws[0], 3000, "repeat 1/3")
	require.Equal(t, 3000, len(draws[0]))
	// 7500 draws of 1000 records: 7.5 passes; 7507 draws of 1001: 7.5 passes (rounded down).
	checkPasses(t, draws[1], 1000, "repeat 2.5 of 1000")
	checkPasses(t, draws[2], 1001, "repeat 2.5 of 1001")
	require.Equal(t, 7507, len(draws[2]))
}

// TestMixtureDeterminism: a mixture's epochs (data, .ids, .source) are the same bytes after
// an unmount and a remount; the shards of W=3 are the epoch cut in three (10001 records: the
// last one left out); another --seed gives another order of ids, but the same interleave of
// sources (it depends only on the counts).
func TestMixtureDeterminism(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	srcs := []*mixSrc{rawSource(t, dir, "a", 0, 3000, 64), rawSource(t, dir, "b", 1, 5000, 64)}
	mix := writeMixture(t, dir, "mix.json", `{"epoch_records": 10001, "sources": [
		{"data": "a", "weight": 0.7},
		{"data": "b", "weight": 0.3}]}`)
	m := mount(t, mix, "--seed", "4")
	mnt := m.dir
	first := map[int]mixEpoch{}
	for _, e := range []int{0, 3} {
		first[e] = readMixEpoch(t, m, "", e)
		require.Equal(t, 10001, len(first[e].ids))
		checkRecords(t, first[e], srcs, fmt.Sprintf("epoch %d", e))
	}
	// dd reads what os.File reads.
	ddSum := strings.Fields(sh(t, "dd if="+m.path("epoch-0003")+" bs=64k status=none | sha256sum"))[0]
	assert.Equal(t, fmt.Sprintf("%x", sum(first[3].data)), ddSum, "dd of epoch-0003")
	m.stop()
	require.False(t, isMounted(mnt))

	m = mountAt(t, mix, mnt, "--seed", "4")
	for _, e := range []int{3, 0} {
		again := readMixEpoch(t, m, "", e)
		what := fmt.Sprintf("epoch %d after a remount", e)
		requireSame(t, first[e].data, again.data, what+": data")
		requireSame(t, first[e].ids, again.ids, what+": ids")
		requireSame(t, first[e].src, again.src, what+": source")
	}
	// Shards: W=3 cuts 10001 records into three of 3333; together they are the first 9999.
	e1 := readMixEpoch(t, m, "", 1)
	var cat mixEpoch
	for r := range 3 {
		part := readMixEpoch(t, m, fmt.Sprintf("shard-%d-of-3/", r), 1)
		require.Equal(t, 3333, len(part.ids), "shard %d of 3", r)
		cat.data = append(cat.data, part.data...)
		cat.ids = append(cat.ids, part.ids...)
		cat.src = append(cat.src, part.src...)
	}
	requireSame(t, e1.data[:9999*64], cat.data, "the shards' data")
	requireSame(t, e1.ids[:9999], cat.ids, "the shards' ids")
	requireSame(t, e1.src[:9999], cat.src, "the shards' sources")

	// Another seed: other ids (and so other bytes), the same interleave.
	other := mount(t, mix, "--seed", "5")
	o := readMixEpoch(t, other, "", 0)
	checkRecords(t, o, srcs, "seed 5")
	requireSame(t, first[0].src, o.src, "seed 5: the interleave depends only on the counts")
	require.False(t, slices.Equal(first[0].ids, o.ids), "--seed changes the order")
	require.NotEqual(t, sum(first[0].data), sum(o.data))
}

// TestMixtureSizesAndKinds: sources of 64-byte records, 4 KiB records, lines (variable
// length, one empty) and a raw file served in place ("options": {"record_size": 64}) make
// one epoch of variable-length records: epoch-NNNN.offsets (records+1 uint64) cuts the data
// into each source's record at its id; info.json says kind variable.
func TestMixtureSizesAndKinds(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	fixed := rawSource(t, dir, "fixed", 0, 400, 64)
	lines := linesSource(t, dir, "lines", 1, 300)
	big := rawSource(t, dir, "big", 2, 100, 4096)
	inPlace := rawSource(t, dir, "inplace", 3, 250, 64)
	srcs := []*mixSrc{fixed, lines, big, inPlace}
	// T_w = 700 records split 2:1 (466.67, 233.33: 467 and 233), 50 of big, 250 of the file.
	mix := writeMixture(t, dir, "mix.json", `{"sources": [
		{"data": "fixed", "weight": 2},
		{"data": "lines", "weight": 1, "name": "text"},
		{"data": "big", "records": 50},
		{"data": "inplace.bin", "repeat": 1, "options": {"record_size": 64}}]}`)
	m := mount(t, mix, "--seed", "6")
	info := mixInfo(t, m)
	assert.Equal(t, "variable", info["kind"])
	assert.Equal(t, "<u8", info["offsets_dtype"])
	assert.Nil(t, info["record_size"], "records of several sizes have no one size")
	assert.Equal(t, "text", infoSource(t, info, 1)["name"])
	assert.Equal(t, "variable", infoSource(t, info, 1)["kind"])
	assert.Equal(t, inPlace.raw, infoSource(t, info, 3)["in_place"], "the file is served in place")
	assert.Equal(t, json.Number("64"), infoSource(t, info, 3)["record_size"])

	for e := range 3 {
		what := fmt.Sprintf("epoch %d", e)
		ep := readMixEpoch(t, m, "", e)
		require.NotNil(t, ep.offs, "%s: epoch-%04d.offsets", what, e)
		require.Equal(t, []int{467, 233, 50, 250}, ep.counts(4), what)
		checkRecords(t, ep, srcs, what)
		checkPasses(t, ep.draws(3), 250, what+": repeat 1 of the file in place")
	}
	// A shard's offsets start at 0 and cut its own data; dd reads the same bytes.
	whole := readMixEpoch(t, m, "", 4)
	half := readMixEpoch(t, m, "shard-1-of-2/", 4)
	require.Equal(t, 500, len(half.ids))
	checkRecords(t, half, srcs, "shard 1 of 2")
	requireSame(t, whole.ids[500:1000], half.ids, "shard 1 of 2: ids")
	requireSame(t, whole.data[whole.offs[500]:whole.offs[1000]], half.data, "shard 1 of 2: data")
	out := filepath.Join(t.TempDir(), "dd.out")
	sh(t, fmt.Sprintf("dd if=%s of=%s bs=4k status=none", m.path("shard-1-of-2/epoch-0004"), out))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	requireSame(t, half.data, got, "dd of shard-1-of-2/epoch-0004")
	checkRandomReads(t, m.path("epoch-0004"), whole.data)
}

// TestMixtureReference compares a mount with docs/examples/mixture_order.py, the spec in
// executable form: the source at every position of three epochs, and the (pass, position)
// of its draw, which is the id that source's own mount (with the seed, shuffle and mix
// info.json gives it) serves at that position of that epoch.
func TestMixtureReference(t *testing.T) {
	requireFUSE(t)
	script, err := filepath.Abs("../docs/examples/mixture_order.py")
	require.NoError(t, err)
	_, err = os.Stat(script)
	require.NoError(t, err, "the reference implementation of a mixture's order")
	dir := t.TempDir()
	sizes := []int{1000, 777, 500}
	srcs := []*mixSrc{rawSource(t, dir, "a", 0, sizes[0], 64), rawSource(t, dir, "b", 1, sizes[1], 64), rawSource(t, dir, "c", 2, sizes[2], 64)}
	// T_w = 1777: 1243.9 and 533.1 are 1244 and 533; c's repeat 2/3 of 500 gives 333 or 334.
	mix := writeMixture(t, dir, "mix.json", `{"sources": [
		{"data": "a", "weight": 0.7},
		{"data": "b", "weight": 0.3, "options": {"seed": 99}},
		{"data": "c", "repeat": "2/3", "options": {"shuffle": "blocks"}}]}`)
	const seed = "11"
	m := mount(t, mix, "--seed", seed)
	info := mixInfo(t, m)
	assert.Equal(t, json.Number("99"), infoSource(t, info, 1)["seed"], "options.seed replaces the derived seed")

	// Each source mounted alone as the mixture orders it.
	alone := make([]*mounted, len(sizes))
	for i := range sizes {
		s := infoSource(t, info, i)
		alone[i] = mount(t, srcs[i].dir, "--seed", s["seed"].(json.Number).String(), "--mix", s["mix"].(json.Number).String(),
			"--shuffle", s["shuffle"].(string))
	}
	aloneIDs := map[[2]int][]uint64{}
	idsOf := func(i, pass int) []uint64 {
		if ids, ok := aloneIDs[[2]int{i, pass}]; ok {
			return ids
		}
		raw, err := os.ReadFile(alone[i].path(fmt.Sprintf("epoch-%04d.ids", pass)))
		require.NoError(t, err)
		ids := make([]uint64, len(raw)/8)
		for k := range ids {
			ids[k] = binary.LittleEndian.Uint64(raw[8*k:])
		}
		aloneIDs[[2]int{i, pass}] = ids
		return ids
	}

	for e := range 3 {
		what := fmt.Sprintf("epoch %d", e)
		cmd := exec.Command("/usr/bin/python3", script, "--mixture", mix, "--sizes", "1000,777,500", "--seed", seed, "--epoch", strconv.Itoa(e))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s: %s", script, stderr.String())
		ref := strings.Split(strings.TrimSpace(string(out)), "\n")
		ep := readMixEpoch(t, m, "", e)
		checkRecords(t, ep, srcs, what)
		require.Equal(t, len(ref), len(ep.src), "%s: records", what)
		for k, line := range ref {
			f := strings.Fields(line)
			require.Len(t, f, 3, "%s: reference line %q", what, line)
			s, err1 := strconv.Atoi(f[0])
			pass, err2 := strconv.Atoi(f[1])
			pos, err3 := strconv.Atoi(f[2])
			require.NoError(t, err1)
			require.NoError(t, err2)
			require.NoError(t, err3)
			require.Equal(t, s, int(ep.src[k]), "%s: position %d: source", what, k)
			ids := idsOf(s, pass)
			require.Less(t, pos, len(ids), "%s: position %d: source %d pass %d", what, k, s, pass)
			require.Equal(t, ids[pos], ep.ids[k], "%s: position %d: source %d pass %d position %d", what, k, s, pass, pos)
		}
	}
}

// TestMixtureS3 mixes a local dataset with one in an object store (MinIO), whose endpoint is
// the source's "endpoint" option: counts and every record's bytes.
func TestMixtureS3(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("mix")
	dir := t.TempDir()
	local := rawSource(t, dir, "local", 0, 2000, 64)
	remote := rawSource(t, dir, "remote", 1, 1500, 4096)
	mustRun(t, "pack", "--quiet", "--endpoint", srv.endpoint(), "--format", "raw", "--record-size", "4096", remote.raw, "s3://mix/sets/remote")
	mix := writeMixture(t, dir, "mix.json", fmt.Sprintf(`{"epoch_records": 3000, "sources": [
		{"data": "local", "weight": 0.6},
		{"data": "s3://mix/sets/remote", "weight": 0.4, "options": {"endpoint": %q, "s3_concurrency": 4}}]}`, srv.endpoint()))
	m := mount(t, mix, "--seed", "2")
	info := mixInfo(t, m)
	assert.Equal(t, "s3://mix/sets/remote", infoSource(t, info, 1)["data"])
	var remoteDraws []uint64
	for e := range 2 {
		what := fmt.Sprintf("epoch %d", e)
		ep := readMixEpoch(t, m, "", e)
		require.Equal(t, []int{1800, 1200}, ep.counts(2), what)
		checkRecords(t, ep, []*mixSrc{local, remote}, what)
		remoteDraws = append(remoteDraws, ep.draws(1)...)
	}
	checkPasses(t, remoteDraws, 1500, "the s3:// source")
}

// TestMixtureRefusals: a mixture that cannot be served is refused in one line on stderr
// (no panic), with exit code 2 for a mistake in the mixture file or the command line (1 for
// data that cannot be opened, as for a mount of it alone; docs/ERRORS.md 33e to 33g), and
// nothing is left mounted.
func TestMixtureRefusals(t *testing.T) {
	dir := t.TempDir()
	rawSource(t, dir, "a", 0, 100, 64)
	rawSource(t, dir, "b", 1, 50, 64)
	cases := []struct {
		name string
		text string // the mixture file, mix.json
		args []string
		code int
		want []string // key words of the message
	}{
		{"missing data", `{"sources": [{"data": "a", "weight": 1}, {"data": "nope", "weight": 1}]}`, nil, 1,
			[]string{"source 1", "nope", "no such"}},
		{"weights sum to 0", `{"sources": [{"data": "a", "weight": 0}, {"data": "b", "weight": 0}]}`, nil, 2,
			[]string{"source 0", "weight 0 must be positive"}},
		// docs/ERRORS.md 33e: "mix.json: source 0 (a/): weight -1 must be positive".
		{"negative weight", `{"sources": [{"data": "a", "weight": 1}, {"data": "b", "weight": -1}]}`, nil, 2,
			[]string{"source 1", "weight", "-1", "must be positive"}},
		{"weight as a string", `{"sources": [{"data": "a", "weight": "0.5"}]}`, nil, 2,
			[]string{"source 0", `weight "0.5"`, "JSON number"}},
		{"two rules", `{"sources": [{"data": "a", "weight": 1, "repeat": 1}]}`, nil, 2,
			[]string{"source 0", "exactly one of", "weight and repeat"}},
		{"no rule", `{"sources": [{"data": "a"}]}`, nil, 2, []string{"source 0", "exactly one of", "none"}},
		{"records 0", `{"sources": [{"data": "a", "records": 0}]}`, nil, 2, []string{"source 0", "records 0 must be positive"}},
		{"weight rounds to 0", `{"epoch_records": 100, "sources": [{"data": "a", "weight": 1000}, {"data": "b", "weight": 0.001}]}`, nil, 2,
			[]string{"source 1", "weight 0.001", "rounds to 0"}},
		{"epoch_records below the others", `{"epoch_records": 40, "sources": [{"data": "a", "weight": 1}, {"data": "b", "records": 50}]}`, nil, 2,
			[]string{"epoch_records 40", "give 50"}},
		{"epoch_records without a weight", `{"epoch_records": 100, "sources": [{"data": "a", "records": 10}]}`, nil, 2,
			[]string{"epoch_records", "no source has a weight"}},
		{"epoch_records with a fractional repeat", `{"epoch_records": 100, "sources": [{"data": "a", "weight": 1}, {"data": "b", "repeat": "1/3"}]}`, nil, 2,
			[]string{"epoch_records", "source 1", "fractional"}},
		{"unknown key", `{"epoch_records": 100, "colour": "red", "sources": [{"data": "a", "weight": 1}]}`, nil, 2,
			[]string{"not a mixture file", `unknown field "colour"`}},
		{"unknown key in a source", `{"sources": [{"data": "a", "weight": 1, "colour": "red"}]}`, nil, 2,
			[]string{"not a mixture file", `unknown field "colour"`}},
		{"no sources", `{"sources": []}`, nil, 2, []string{"no sources"}},
		{"whole-mount option", `{"sources": [{"data": "a", "weight": 1, "options": {"cache_size": "64MiB"}}]}`, nil, 2,
			[]string{"source 0", `"cache_size"`, "whole mount", "--cache-size"}},
		{"unknown option", `{"sources": [{"data": "a", "weight": 1, "options": {"colour": "red"}}]}`, nil, 2,
			[]string{"source 0", `unknown option "colour"`, "record_size"}},
		{"bad option value", `{"sources": [{"data": "a", "weight": 1, "options": {"mix": "lots"}}]}`, nil, 2,
			[]string{"source 0", "--mix"}},
		{"in-place option on a packed dataset", `{"sources": [{"data": "a", "weight": 1, "options": {"record_size": 64}}]}`, nil, 2,
			[]string{"source 0", "--record-size", "dataset directory"}},
		{"--record-size on the command line", `{"sources": [{"data": "a", "weight": 1}]}`, []string{"--record-size", "64"}, 2,
			[]string{"--record-size is a source's flag", "record_size"}},
		// A mixture file that is not JSON (docs/ERRORS.md 33e: "a mixture file (*.json with
		// "sources") that is not one: not JSON").
		{"not JSON", `{"sources": [{"data": "a", "weight": 1},]}`, nil, 2, []string{"mix.json", "not a mixture file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mixPath := writeMixture(t, t.TempDir(), "mix.json", c.text)
			// The sources are relative to the mixture's directory.
			text := strings.NewReplacer(`"data": "a"`, fmt.Sprintf(`"data": %q`, filepath.Join(dir, "a")),
				`"data": "b"`, fmt.Sprintf(`"data": %q`, filepath.Join(dir, "b"))).Replace(c.text)
			require.NoError(t, os.WriteFile(mixPath, []byte(text), 0o644))
			errs := refuseMount(t, mixPath, c.code, c.args...)
			for _, w := range c.want {
				assert.Contains(t, errs, w)
			}
		})
	}
	// A file named .json that does not hold a JSON object is data, served in place: it needs
	// a record size, and the message says so, and what a mixture file would be.
	t.Run("garbage x.json", func(t *testing.T) {
		path := writeMixture(t, t.TempDir(), "x.json", "not json at all {{{\n")
		errs := refuseMount(t, path, 2)
		for _, w := range []string{"x.json", "--record-size", "mixture", `"sources"`} {
			assert.Contains(t, errs, w)
		}
		t.Logf("x.json of garbage: %s", strings.TrimSpace(errs))
	})
}

// refuseMount runs blockfs mount ARGS DATA MNT, which must exit with code within 20 s
// printing one line on stderr starting with "blockfs:" (no panic), and leave nothing
// mounted. It returns the line.
func refuseMount(t *testing.T, data string, code int, args ...string) string {
	t.Helper()
	mnt := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(append([]string{"mount"}, args...), data, mnt)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if isMounted(mnt) {
		mustRun(t, "unmount", mnt)
		t.Fatalf("blockfs mount served what it should refuse: %s", stderr.String())
	}
	errs := stderr.String()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running blockfs mount: %v", err)
	}
	require.NotZero(t, got, "refused: %s", errs)
	assert.Equal(t, code, got, "exit code: %s", errs)
	assert.True(t, strings.HasPrefix(errs, "blockfs: "), "%q", errs)
	assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
	assert.NotContains(t, errs, "panic")
	assert.NotContains(t, errs, "goroutine")
	assert.Empty(t, stdout.String())
	return errs
}
