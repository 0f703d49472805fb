package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
)

// runBlockfs runs `blockfs ARGV` and returns its error, exit status and what it wrote to
// stderr (the notes pack prints there).
func runBlockfs(t *testing.T, argv ...string) (error, int, string) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	require.NoError(t, err)
	saved := os.Stderr
	os.Stderr = f
	defer func() { os.Stderr = saved }()
	root := newRoot()
	root.SetArgs(argv)
	root.SetOut(new(bytes.Buffer))
	root.SetErr(new(bytes.Buffer))
	err = root.Execute()
	_, _ = f.Seek(0, io.SeekStart)
	stderr, _ := io.ReadAll(f)
	f.Close()
	if err != nil {
		return err, exitCode(err), string(stderr)
	}
	return nil, 0, string(stderr)
}

// writeTarShards writes shards WebDataset tar files of per samples each into dir: KEY.bin and
// KEY.cls.
func writeTarShards(t *testing.T, dir string, shards, per int) {
	t.Helper()
	for s := range shards {
		var members []dstest.TarMember
		for i := range per {
			key := fmt.Sprintf("%04d", s*per+i)
			members = append(members, dstest.TarMember{Name: key + ".bin", Data: "payload " + key},
				dstest.TarMember{Name: key + ".cls", Data: fmt.Sprint(i % 3)})
		}
		dstest.WriteTar(t, filepath.Join(dir, fmt.Sprintf("shard-%d.tar", s)), members)
	}
}

// TestPackFolderOfShards: pack over a folder of WebDataset shards (and a hidden file beside
// them) reads their samples with fields, and says so; --format files, or an option of a
// folder of files, packs each file as one record, as before.
func TestPackFolderOfShards(t *testing.T) {
	src, out := filepath.Join(t.TempDir(), "wds"), t.TempDir()
	require.NoError(t, os.Mkdir(src, 0o755))
	writeTarShards(t, src, 3, 10)
	require.NoError(t, os.WriteFile(filepath.Join(src, ".DS_Store"), []byte("junk"), 0o644))

	ds := filepath.Join(out, "ds")
	err, code, stderr := runBlockfs(t, "pack", "--quiet", src, ds)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "note: "+src+" is a folder of 3 webdataset shards: packed their samples with fields (--format files packs each file as one record instead)")
	man, err := layout.ReadFieldsManifest(ds)
	require.NoError(t, err)
	assert.EqualValues(t, 30, man.Records)
	var names []string
	for _, fl := range man.Fields {
		names = append(names, fl.Name)
	}
	assert.ElementsMatch(t, []string{"bin", "cls"}, names)

	for _, extra := range [][]string{{"--format", "files"}, {"--no-shuffle"}, {"--include", "*.tar"}} {
		plain := filepath.Join(out, fmt.Sprint("plain", len(extra[0])))
		err, _, stderr := runBlockfs(t, append(append([]string{"pack", "--quiet"}, extra...), src, plain)...)
		require.NoError(t, err, "%v", extra)
		assert.NotContains(t, stderr, "shards", "%v", extra)
		assert.NoFileExists(t, filepath.Join(plain, layout.FieldsManifestName), "%v", extra)
		raw, err := os.ReadFile(filepath.Join(plain, layout.ManifestName))
		require.NoError(t, err, "%v", extra)
		var m struct {
			Records uint64 `json:"records"`
		}
		require.NoError(t, json.Unmarshal(raw, &m))
		assert.EqualValues(t, 3, m.Records, "%v: the 3 tar files", extra)
	}
}

// TestPackFieldFlagsRefusals: --columns, --segments-by and --fill-missing name the inputs that
// take each: tables the first two, WebDataset shards the last (never "webdataset" for
// --segments-by).
func TestPackFieldFlagsRefusals(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "x.raw")
	require.NoError(t, os.WriteFile(raw, make([]byte, 64), 0o644))
	lines := filepath.Join(dir, "x.jsonl")
	require.NoError(t, os.WriteFile(lines, []byte("{}\n"), 0o644))
	wds := filepath.Join(dir, "wds")
	require.NoError(t, os.Mkdir(wds, 0o755))
	writeTarShards(t, wds, 1, 4)
	const takes = ": --columns and --segments-by are for tables (--format parquet, arrow), --fill-missing for WebDataset shards (--format webdataset)"
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"--format", "raw", "--record-size", "4", "--segments-by", "id", raw}, "--segments-by does not apply to --format raw" + takes},
		{[]string{"--columns", "a", "--fill-missing", lines}, "--columns and --fill-missing do not apply to this input (it has no fields)" + takes},
		{[]string{"--format", "files", "--columns", "a", "--segments-by", "b", "--fill-missing", wds}, "--columns, --segments-by and --fill-missing do not apply to --format files" + takes},
		{[]string{"--segments-by", "cls", filepath.Join(wds, "*.tar")}, "--segments-by does not apply to --format webdataset" + takes},
		{[]string{"--format", "tfrecord", "--segments-by", "cls", wds}, "--segments-by does not apply to --format tfrecord" + takes},
	} {
		err, code, _ := runBlockfs(t, append(append([]string{"pack", "--quiet"}, tc.argv...), filepath.Join(dir, "out"))...)
		require.Error(t, err, "%v", tc.argv)
		assert.Equal(t, 2, code, "%v: %v", tc.argv, err)
		assert.Equal(t, tc.want, err.Error(), "%v", tc.argv)
	}
}
