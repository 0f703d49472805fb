package test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeCorpus writes a JSON Lines corpus of n lines with Python (an independent writer) and
// returns its path.
func writeCorpus(t *testing.T, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "corpus.jsonl")
	script := `
import json, random, sys
r = random.Random(40)
words = ["block", "epoch", "shuffle", "record", "token", "the", "of", "loader", "disk", "page"]
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({"id": i, "text": " ".join(r.choice(words) for _ in range(r.randint(3, 80)))}) + "\n")
`
	out, err := exec.Command("/usr/bin/python3", "-c", script, path, fmt.Sprint(n)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return path
}

// writeTokens writes n uint16 tokens drawn from a Zipf law (as a tokenized corpus is) with
// numpy, as a raw file, and returns its path.
func writeTokens(t *testing.T, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "tokens.u16")
	script := `
import numpy as np, sys
r = np.random.default_rng(40)
t = np.minimum(r.zipf(1.2, int(sys.argv[2])), 50000).astype("<u2")
t.tofile(sys.argv[1])
`
	out, err := exec.Command("/usr/bin/python3", "-c", script, path, fmt.Sprint(n)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return path
}

// decompressStats reads stats.json's "decompress" (one dataset's).
func decompressStats(t *testing.T, m *mounted) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(m.path(".blockfs/stats.json"))
	require.NoError(t, err)
	var st struct {
		Decompress map[string]float64 `json:"decompress"`
	}
	require.NoError(t, json.Unmarshal(b, &st))
	return st.Decompress
}

// sameFiles requires that the mounts serve the same bytes at each name.
func sameFiles(t *testing.T, want, got *mounted, names ...string) {
	t.Helper()
	for _, name := range names {
		w, err := os.ReadFile(want.path(name))
		require.NoError(t, err, name)
		require.NotEmpty(t, w, name)
		g, err := os.ReadFile(got.path(name))
		require.NoError(t, err, name)
		require.True(t, slices.Equal(w, g), "%s differs between the raw and the compressed dataset", name)
	}
}

// TestCompressedMatchesRaw packs each shape of dataset raw and with --compress zstd, mounts
// both with the same seed, and requires the same bytes in every file read (with os.File and
// dd): fixed-size records pre-shuffled, JSON Lines text, windows over uint16 tokens, and
// WebDataset samples with fields (the random image field is kept raw, and pack says so).
// compressedCase is a shape of dataset packed raw and compressed: its input and flags, the
// mount's flags and the files whose bytes must agree.
type compressedCase struct {
	name       string
	src        string
	pack       []string
	mount      []string
	files      []string
	ratio      float64 // stored/raw at most
	keptRaw    string  // a note pack must print
	compressed bool    // info.json has compression (one dataset)
}

// compressedCases writes the inputs of each shape into dir: pre-shuffled fixed records, JSON
// Lines, windows over uint16 tokens, WebDataset samples with fields.
func compressedCases(t *testing.T, dir string) []compressedCase {
	corpus := writeCorpus(t, dir, 30000)
	tokens := writeTokens(t, dir, 3_000_000)
	glob, _ := writeShards(t, dir, 600, 200)
	return []compressedCase{
		{"lines", corpus, []string{"--block-size", "256KiB", "--seed", "3"}, nil,
			[]string{"epoch-0000", "epoch-0000.offsets", "epoch-0001.ids", "shard-1-of-3/epoch-0002"}, 0.5, "", true},
		{"fixed", tokens, []string{"--format", "raw", "--record-size", "64", "--block-size", "512KiB"}, nil,
			[]string{"epoch-0000", "epoch-0001", "epoch-0001.ids"}, 0.9, "", true},
		{"windows", tokens, []string{"--format", "raw", "--record-size", "2", "--no-shuffle", "--block-size", "1MiB"},
			[]string{"--window", "1024", "--stride", "512"}, []string{"epoch-0000", "epoch-0003", "epoch-0003.ids"}, 0.9, "", true},
		{"fields", glob, []string{"--block-size", "128KiB"}, []string{"--cache-size", "256MiB"},
			[]string{"epoch-0000.jpg", "epoch-0000.json", "epoch-0000.json.offsets", "epoch-0000.cls", "epoch-0002.ids"}, 1, `field "jpg" is stored raw`, false},
	}
}

func TestCompressedMatchesRaw(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	for _, c := range compressedCases(t, dir) {
		t.Run(c.name, func(t *testing.T) {
			raw, comp := filepath.Join(dir, c.name+"-raw"), filepath.Join(dir, c.name+"-zstd")
			mustRun(t, append(append([]string{"pack", "--quiet"}, c.pack...), c.src, raw)...)
			out, errs, code := run(t, append(append([]string{"pack", "--quiet", "--compress", "zstd"}, c.pack...), c.src, comp)...)
			require.Equal(t, 0, code, errs)
			if c.keptRaw != "" {
				require.Contains(t, errs, c.keptRaw)
			}
			if c.compressed {
				require.Contains(t, out, "compressed with zstd level 3")
				require.Contains(t, mustRun(t, "verify", comp), "compressed blocks decompressed whole")
			}
			mr := mount(t, raw, append([]string{"--seed", "5"}, c.mount...)...)
			mc := mount(t, comp, append([]string{"--seed", "5"}, c.mount...)...)
			sameFiles(t, mr, mc, c.files...)
			dd := func(p string) string { return strings.Fields(sh(t, "dd if="+p+" bs=64k status=none | sha256sum"))[0] }
			name := c.files[0]
			require.Equal(t, dd(mr.path(name)), dd(mc.path(name)))
			if !c.compressed {
				return
			}
			info := mountInfo(t, mc)
			cz, ok := info["compression"].(map[string]any)
			require.True(t, ok, "info.json has compression: %v", info)
			assert.Equal(t, "zstd", cz["codec"])
			assert.LessOrEqual(t, cz["ratio"].(float64), c.ratio)
			_, ok = mountInfo(t, mr)["compression"]
			assert.False(t, ok, "a raw dataset's info.json has no compression")
			st := decompressStats(t, mc)
			assert.Positive(t, st["frames"])
			assert.Positive(t, st["seconds"])
			assert.Less(t, st["stored_bytes"], st["bytes"])
			assert.Zero(t, st["errors"])
		})
	}
}

// TestCompressedFlippedByte flips one byte inside a compressed block: every read of the epoch
// that needs that block's frame is EIO, in bounded time, and every other read serves the raw
// dataset's bytes (never other bytes); verify names the block. A tampered stored_bytes is
// refused by mount in one line.
func TestCompressedFlippedByte(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	corpus := writeCorpus(t, dir, 20000)
	raw, comp := filepath.Join(dir, "raw"), filepath.Join(dir, "zstd")
	flags := []string{"--block-size", "256KiB", "--no-shuffle"}
	mustRun(t, append(append([]string{"pack", "--quiet"}, flags...), corpus, raw)...)
	mustRun(t, append(append([]string{"pack", "--quiet", "--compress", "zstd:1"}, flags...), corpus, comp)...)
	mr := mount(t, raw, "--shuffle", "none")
	want, err := os.ReadFile(mr.path("epoch-0000"))
	require.NoError(t, err)

	block := filepath.Join(comp, "blocks/000002.bin")
	data, err := os.ReadFile(block)
	require.NoError(t, err)
	data[len(data)/2] ^= 0x10
	require.NoError(t, os.WriteFile(block, data, 0o644))
	mc := mount(t, comp, "--shuffle", "none", "--readahead", "0")
	start := time.Now()
	failed := readAllOrEIO(t, mc.path("epoch-0000"), want, 64<<10)
	assert.Positive(t, failed, "the damaged block's reads fail")
	assert.Less(t, time.Since(start), 30*time.Second)
	out, err := exec.Command("dd", "if="+mc.path("epoch-0000"), "of=/dev/null", "bs=1M").CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "Input/output error")
	assert.Positive(t, decompressStats(t, mc)["errors"])
	waitLog(t, mc, "compressed block corrupt: frame")
	assert.Contains(t, mc.stderr.String(), "corrupt dataset: read "+block+" at offset ")
	_, errs, code := run(t, "verify", comp)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "blocks/000002.bin")

	// A manifest whose stored size for a block is not its file's: refused, nothing served.
	man, err := os.ReadFile(filepath.Join(comp, "blockfs.json"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(man, &m))
	b0 := m["blocks"].([]any)[0].(map[string]any)
	b0["stored_bytes"] = b0["stored_bytes"].(float64) + 4096
	man, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(comp, "blockfs.json"), man, 0o644))
	_, errs, code = run(t, "mount", comp, t.TempDir())
	assert.Equal(t, 1, code, errs)
	assert.Contains(t, errs, "blocks/000000.bin")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
}

// TestCompressedParts packs a corpus in parts with --compress and merges them: the merged
// dataset serves the epochs of the same parts packed raw; parts that disagree on --compress
// are refused at the merge.
func TestCompressedParts(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	var inputs []string
	for i := range 3 {
		in := filepath.Join(dir, fmt.Sprintf("in-%d", i))
		require.NoError(t, os.Mkdir(in, 0o755))
		inputs = append(inputs, writeCorpus(t, in, 4000+1000*i))
	}
	raw, comp, mixed := filepath.Join(dir, "raw"), filepath.Join(dir, "zstd"), filepath.Join(dir, "mixed")
	packPartsCLI(t, inputs, raw, 2, "--block-size", "128KiB")
	packPartsCLI(t, inputs, comp, 2, "--block-size", "128KiB", "--compress", "zstd")
	mustRun(t, "pack", "--merge", raw)
	mustRun(t, "pack", "--merge", comp)
	mr := mount(t, raw, "--seed", "2")
	mc := mount(t, comp, "--seed", "2")
	sameFiles(t, mr, mc, "epoch-0000", "epoch-0000.offsets", "epoch-0001.ids")

	mustRun(t, "pack", "--part", "0/2", "--quiet", "--block-size", "128KiB", "--compress", "zstd", inputs[0], inputs[1], inputs[2], mixed)
	mustRun(t, "pack", "--part", "1/2", "--quiet", "--block-size", "128KiB", inputs[0], inputs[1], inputs[2], mixed)
	_, errs, code := run(t, "pack", "--merge", mixed)
	assert.Equal(t, 1, code, errs)
	assert.Contains(t, errs, "is foreign")
	assert.Contains(t, errs, "compress zstd:3")
}

// TestCompressedS3 packs each shape with --compress into MinIO (fixed records, lines, fields),
// and mounts it: the epochs are the local raw dataset's. For the corpus, with and without a
// disk cache: the store serves well under half the raw bytes for an epoch, /metrics has the
// decompress series, a body damaged in transit is fetched again, never served, and the disk
// cache keeps the compressed files.
func TestCompressedS3(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	proxy := startProxy(t, srv.addr)
	ep := "--endpoint=" + proxy.endpoint()
	dir := t.TempDir()
	corpus := writeCorpus(t, dir, 30000)
	raw := filepath.Join(dir, "raw")
	flags := []string{"--block-size", "256KiB", "--seed", "4"}
	mustRun(t, append(append([]string{"pack", "--quiet"}, flags...), corpus, raw)...)
	url := "s3://data/zstd"
	mustRun(t, append(append([]string{"pack", "--quiet", "--compress", "zstd", ep}, flags...), corpus, url)...)
	require.Contains(t, mustRun(t, "info", ep, url), "compressed:   zstd level 3")
	// verify reads each object once: its CRC32C and its frames in one pass. The same pack made
	// locally says how many bytes the objects hold.
	local := filepath.Join(dir, "zstd-local")
	mustRun(t, append(append([]string{"pack", "--quiet", "--compress", "zstd"}, flags...), corpus, local)...)
	var stored int64
	require.NoError(t, filepath.WalkDir(filepath.Join(local, "blocks"), func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			info, ierr := e.Info()
			if ierr != nil {
				return ierr
			}
			stored += info.Size()
		}
		return err
	}))
	before := proxy.sent.Load()
	require.Contains(t, mustRun(t, "verify", ep, url), "every frame checked")
	sent := proxy.sent.Load() - before
	require.Less(t, float64(sent), 1.05*float64(stored)+float64(1<<20), "verify fetched %d bytes of %d stored", sent, stored)

	// Every shape from the store (but windows, which --window serves from local data only):
	// the local raw pack's bytes.
	for _, c := range compressedCases(t, dir) {
		if c.name == "windows" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			raw, url := filepath.Join(dir, c.name+"-raw"), "s3://data/"+c.name
			mustRun(t, append(append([]string{"pack", "--quiet"}, c.pack...), c.src, raw)...)
			mustRun(t, append(append([]string{"pack", "--quiet", "--compress", "zstd", ep}, c.pack...), c.src, url)...)
			mr := mount(t, raw, append([]string{"--seed", "7"}, c.mount...)...)
			mc := mount(t, url, append([]string{ep, "--seed", "7"}, c.mount...)...)
			sameFiles(t, mr, mc, c.files...)
		})
	}

	mr := mount(t, raw, "--seed", "6")
	rawBytes := 0
	for _, name := range []string{"epoch-0000", "epoch-0000.offsets", "epoch-0000.ids"} {
		st, err := os.Stat(mr.path(name))
		require.NoError(t, err)
		rawBytes += int(st.Size())
	}
	proxy.sent.Store(0)
	addr := freeAddr(t)
	mc := mount(t, url, ep, "--seed", "6", "--cache-size", "64MiB", "--metrics", addr)
	sameFiles(t, mr, mc, "epoch-0000", "epoch-0000.offsets", "epoch-0000.ids")
	fetched := proxy.sent.Load()
	// /metrics serves every documented blockfs_decompress_ metric, with stats.json's values.
	fams := scrape(t, addr)
	st := decompressStats(t, mc)
	n := 0
	for _, name := range documentedMetrics(t) {
		if strings.HasPrefix(name, "blockfs_decompress_") {
			require.Contains(t, fams, name)
			n++
		}
	}
	assert.Equal(t, 5, n, "USAGE.md lists the decompress metrics")
	assert.Equal(t, st["frames"], fams["blockfs_decompress_frames_total"].Metric[0].Counter.GetValue())
	assert.Equal(t, st["bytes"], fams["blockfs_decompress_bytes_total"].Metric[0].Counter.GetValue())
	t.Logf("one epoch of %d bytes (data, offsets, ids) fetched %d bytes from the store (%.2f)", rawBytes, fetched, float64(fetched)/float64(rawBytes))
	assert.Less(t, float64(fetched), 0.5*float64(rawBytes))

	md := mount(t, url, ep, "--seed", "6", "--disk-cache", filepath.Join(dir, "dc"), "--cache-size", "64MiB")
	proxy.flip.Store(1) // a damaged body: fetched again
	sameFiles(t, mr, md, "epoch-0001", "epoch-0001.offsets", "shard-0-of-2/epoch-0002")
	assert.Zero(t, decompressStats(t, md)["errors"])

	// The disk cache keeps the compressed files: their bytes are the store's.
	var cached int64
	require.NoError(t, filepath.Walk(filepath.Join(dir, "dc"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			cached += fi.Size()
		}
		return err
	}))
	assert.Less(t, float64(cached), 0.5*float64(rawBytes))
}

// TestCompressedIndependentReader reads a compressed pack with docs/examples/read_compressed.py,
// a reader written from FORMAT.md alone (Python's zstandard, its own CRC32C): every block's
// bytes are the raw pack's, blocks of several frames and ranges across frames included, and a
// flipped byte is refused there too.
func TestCompressedIndependentReader(t *testing.T) {
	py := requirePython(t, "zstandard")
	dir := t.TempDir()
	tokens := writeTokens(t, dir, 4_000_000)
	raw, comp := filepath.Join(dir, "raw"), filepath.Join(dir, "zstd")
	flags := []string{"--format", "raw", "--record-size", "8", "--block-size", "2500KiB"}
	mustRun(t, append(append([]string{"pack", "--quiet"}, flags...), tokens, raw)...)
	mustRun(t, append(append([]string{"pack", "--quiet", "--compress", "zstd:7"}, flags...), tokens, comp)...)
	var m struct {
		Compression struct{ Frame int64 }
		Blocks      []struct {
			File        string
			Bytes       int64
			StoredBytes int64 `json:"stored_bytes"`
		}
	}
	man, err := os.ReadFile(filepath.Join(comp, "blockfs.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(man, &m))
	require.EqualValues(t, 1<<20, m.Compression.Frame)
	require.Greater(t, m.Blocks[0].Bytes, 2*m.Compression.Frame, "blocks of several frames")
	var want []byte
	for _, b := range m.Blocks {
		require.Positive(t, b.StoredBytes)
		data, err := os.ReadFile(filepath.Join(raw, b.File))
		require.NoError(t, err)
		want = append(want, data...)
	}
	reader := func(args ...string) *exec.Cmd {
		return exec.Command(py, append([]string{"../docs/examples/read_compressed.py"}, args...)...)
	}
	out := filepath.Join(dir, "out.bin")
	res, err := reader(comp, out).CombinedOutput()
	require.NoError(t, err, "%s", res)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, slices.Equal(want, got), "read_compressed.py differs from the raw pack")
	a := m.Compression.Frame - 100 // across frames 0 and 1 of block 1
	res, err = reader(comp, "--range", "1", fmt.Sprint(a), "300").Output()
	require.NoError(t, err)
	off := m.Blocks[0].Bytes + a
	require.Equal(t, fmt.Sprintf("%x\n", want[off:off+300]), string(res))

	block := filepath.Join(comp, m.Blocks[1].File)
	data, err := os.ReadFile(block)
	require.NoError(t, err)
	data[len(data)-10] ^= 1
	require.NoError(t, os.WriteFile(block, data, 0o644))
	res, err = reader(comp, out).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(res), "CRC32C")
}
