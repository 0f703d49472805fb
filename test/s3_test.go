package test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// s3Sources writes the inputs the object store tests pack: fixed-size records (raw) and a
// folder of files (variable-length, with names).
func s3Sources(t *testing.T, dir string, raw, files int) (string, string) {
	r := rand.New(rand.NewPCG(7, 11))
	rawPath := filepath.Join(dir, "records.bin")
	data := make([]byte, raw*1000)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	require.NoError(t, os.WriteFile(rawPath, data, 0o644))
	folder := filepath.Join(dir, "files")
	for i := range files {
		sub := filepath.Join(folder, fmt.Sprintf("d%02d", i%7))
		require.NoError(t, os.MkdirAll(sub, 0o755))
		rec := make([]byte, r.IntN(9000))
		for j := range rec {
			rec[j] = byte(r.Uint32())
		}
		require.NoError(t, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%04d.dat", i)), rec, 0o644))
	}
	return rawPath, folder
}

// TestS3MountMatchesLocal packs the same inputs into a local directory and into MinIO, mounts
// both with the same seed and compares what the mounts serve, byte for byte: epochs, shards,
// ids, offsets and names, read with os.File and dd. verify and info work on the s3:// dataset,
// pack writes the manifest last, and refuses to replace a dataset without --force.
func TestS3MountMatchesLocal(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	proxy := startProxy(t, srv.addr) // to see the order of pack's requests
	dir := t.TempDir()
	raw, folder := s3Sources(t, dir, 6000, 400)
	ep := "--endpoint=" + proxy.endpoint()

	cases := []struct {
		name  string
		src   string
		flags []string
		files []string // mount files to compare besides epochs
	}{
		{"fixed", raw, []string{"--format", "raw", "--record-size", "1000", "--block-size", "256KiB", "--seed", "5"},
			[]string{"epoch-0000.ids", "shard-1-of-3/epoch-0002", "shard-0-of-3/epoch-0002.ids"}},
		{"files", folder, []string{"--block-size", "128KiB", "--seed", "9"},
			[]string{"epoch-0000.offsets", "epoch-0001.ids", "shard-1-of-2/epoch-0003.offsets", ".blockfs/names.txt"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			local := filepath.Join(dir, c.name+"-local")
			url := "s3://data/sets/" + c.name
			mustRun(t, append(append([]string{"pack", "--quiet"}, c.flags...), c.src, local)...)
			before := len(proxy.requests())
			mustRun(t, append(append([]string{"pack", "--quiet", ep}, c.flags...), c.src, url)...)
			// The manifest is the last object written: a dataset appears whole or not at all.
			var puts []string
			for _, r := range proxy.requests()[before:] {
				if strings.HasPrefix(r, "PUT ") || strings.HasPrefix(r, "POST ") {
					puts = append(puts, r)
				}
			}
			require.NotEmpty(t, puts)
			require.True(t, strings.HasSuffix(puts[len(puts)-1], "/sets/"+c.name+"/blockfs.json"), "last write %s", puts[len(puts)-1])
			for _, p := range puts[:len(puts)-1] {
				require.NotContains(t, p, "blockfs.json")
			}

			// A second pack without --force is refused in one line; with it, it replaces.
			_, errs, code := run(t, append(append([]string{"pack", "--quiet", ep}, c.flags...), c.src, url)...)
			require.Equal(t, 1, code, errs)
			require.Contains(t, errs, "--force")
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
			mustRun(t, append(append([]string{"pack", "--quiet", "--force", ep}, c.flags...), c.src, url)...)

			out := mustRun(t, "verify", ep, url)
			require.Contains(t, out, url+": ok")
			infoLocal := mustRun(t, "info", local)
			infoRemote := mustRun(t, "info", ep, url)
			require.Equal(t, strings.ReplaceAll(infoLocal, local, url), infoRemote)

			ml := mount(t, local, "--seed", "3")
			mr := mount(t, url, ep, "--seed", "3", "--s3-concurrency", "4")
			for _, name := range append([]string{"epoch-0000", "epoch-0001", "epoch-0007"}, c.files...) {
				want, err := os.ReadFile(ml.path(name))
				require.NoError(t, err, name)
				require.NotEmpty(t, want, name)
				got, err := os.ReadFile(mr.path(name))
				require.NoError(t, err, name)
				require.True(t, slices.Equal(want, got), "%s differs between the local and the s3:// mount", name)
			}
			// dd, the way users read an epoch, on an epoch not read yet.
			sum := func(p string) string {
				return strings.Fields(sh(t, "dd if="+p+" bs=1M status=none | sha256sum"))[0]
			}
			require.Equal(t, sum(ml.path("epoch-0004")), sum(mr.path("epoch-0004")))
			var info map[string]any
			raw, err := os.ReadFile(mr.path(".blockfs/info.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(raw, &info))
			// The readahead derived from --s3-part-size and --s3-concurrency (here 256 MiB) gives
			// way to a smaller --cache-size given by the user.
			small := mount(t, url, ep, "--seed", "3", "--s3-part-size", "16MiB", "--cache-size", "64MiB")
			require.Equal(t, sum(ml.path("epoch-0005")), sum(small.path("epoch-0005")))
			raw, err = os.ReadFile(small.path(".blockfs/info.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(raw, &info))
			require.Less(t, info["readahead"].(float64), float64(64<<20))
			require.GreaterOrEqual(t, info["readahead"].(float64), float64(16<<20))
		})
	}

	// Bad input: one line, exit 1 or 2, never a trace.
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"info", ep, "s3://data/nothing-here"}, 1, "no manifest"},
		{[]string{"info", ep, "s3:///x"}, 2, "no bucket"},
		{[]string{"verify", ep, "s3://no-such-bucket/x"}, 1, `there is no bucket "no-such-bucket"`},
		{[]string{"info", "--s3-part-size", "1MiB", ep, "s3://data/sets/fixed"}, 2, "--s3-part-size"},
		{[]string{"mount", ep, "--record-size", "4", "s3://data/sets/fixed", t.TempDir()}, 2, "--record-size"},
	} {
		_, errs, code := run(t, c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, errs)
		require.Contains(t, errs, c.msg, "%v", c.args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "%v: %s", c.args, errs)
	}
}

// sha is a short digest for messages.
func sha(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b))[:12] }
