package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusals runs bad command lines and checks each gets one clear line on stderr, the
// documented exit code (2 usage, 1 failure), no panic, and leaves the dataset untouched.
func TestRefusals(t *testing.T) {
	p := packRaw(t, 64, "64KiB")
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	full := filepath.Join(dir, "full")
	require.NoError(t, os.MkdirAll(filepath.Join(full, "x"), 0o755))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.Mkdir(empty, 0o755))
	odd := filepath.Join(dir, "odd.bin")
	require.NoError(t, os.WriteFile(odd, make([]byte, 4097), 0o644))
	inside := filepath.Join(p.dir, "blocks")
	notData := t.TempDir()

	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"mount", "--bogus", p.dir, empty}, 2, "unknown flag: --bogus"},
		{[]string{"mount", p.dir}, 2, "takes 2 arguments"},
		{[]string{"mount", "--cache-size", "-1", p.dir, empty}, 2, "must not be negative"},
		{[]string{"mount", "--cache-size", "lots", p.dir, empty}, 2, "is not a size"},
		{[]string{"mount", "--cache-size", "1MiB", p.dir, empty}, 2, "--cache-size 1.0 MiB is too small"},
		{[]string{"mount", "--readahead", "5EiB", p.dir, empty}, 2, "too large"},
		{[]string{"mount", "--mix", "0", p.dir, empty}, 2, "--mix 0 is out of range"},
		{[]string{"mount", "--mix", "99999999", p.dir, empty}, 2, "out of range"},
		{[]string{"mount", "--order-version", "3", p.dir, empty}, 2, `--order-version "3": want 1 or 2`},
		{[]string{"order", "--ids", "--mix", "0", p.dir}, 2, "--mix 0 is out of range (1 to 65536, or auto)"},
		{[]string{"mount", "--shuffle", "random", p.dir, empty}, 2, "unknown shuffle mode"},
		{[]string{"mount", "--shuffle", "blocks", "--mix", "2", p.dir, empty}, 2, "--mix 2: mix 2 needs shuffle mode full (mode is blocks)"},
		{[]string{"mount", "--epochs", "0", p.dir, empty}, 2, "--epochs 0 is out of range"},
		{[]string{"mount", "--seed", "-3", p.dir, empty}, 2, `--seed "-3": want a whole number from 0 to`},
		{[]string{"mount", p.dir, filepath.Join(dir, "missing")}, 1, "does not exist"},
		{[]string{"mount", p.dir, file}, 1, "is not a directory"},
		{[]string{"mount", p.dir, full}, 1, "is not empty"},
		{[]string{"mount", p.dir, inside}, 1, "inside the dataset"},
		{[]string{"mount", notData, empty}, 1, "no manifest"},
		{[]string{"mount", filepath.Join(dir, "nope"), empty}, 1, "no such directory"},
		{[]string{"info", notData}, 1, "no manifest"},
		{[]string{"pack", p.raw, filepath.Join(dir, "x")}, 1, "give --format raw (with --record-size)"},
		{[]string{"pack", "--format", "raw", p.raw, filepath.Join(dir, "x")}, 2, "--record-size is required"},
		{[]string{"pack", "--record-size", "0", p.raw, filepath.Join(dir, "x")}, 2, "at least 1 byte"},
		{[]string{"pack", "--record-size", "4096", "--format", "orc", p.raw, filepath.Join(dir, "x")}, 2, "unknown format \"orc\""},
		{[]string{"pack", "--compress", "lz4", p.raw, filepath.Join(dir, "x")}, 2, `--compress lz4: unknown codec "lz4" (zstd, zstd:LEVEL or none)`},
		{[]string{"pack", "--compress", "zstd:30", p.raw, filepath.Join(dir, "x")}, 2, "--compress zstd:30: the zstd level is a number from 1 to 22"},
		{[]string{"pack", "--record-size", "4096", "--format", "parquet", p.raw, filepath.Join(dir, "x")}, 2, "do not apply to --format parquet"},
		{[]string{"pack", "--record-size", "1MiB", "--block-size", "64KiB", p.raw, filepath.Join(dir, "x")}, 2, "larger than --block-size"},
		{[]string{"pack", "--record-size", "4096", odd, filepath.Join(dir, "x")}, 1, "not a multiple of the record size 4096"},
		{[]string{"pack", "--record-size", "4096", p.raw, p.dir}, 1, "already exists (use --force"},
		{[]string{"unmount", empty}, 1, "is not mounted"},
		{[]string{"frobnicate"}, 1, "unknown command"},
	}
	manifest, err := os.ReadFile(filepath.Join(p.dir, "blockfs.json"))
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, errs, code := run(t, c.args...)
			assert.Equal(t, c.code, code, "exit code; stderr: %s", errs)
			lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
			assert.Len(t, lines, 1, "one line: %q", errs)
			assert.True(t, strings.HasPrefix(errs, "blockfs: "), errs)
			assert.Contains(t, errs, c.msg)
			assert.NotContains(t, errs, "goroutine")
		})
	}
	after, err := os.ReadFile(filepath.Join(p.dir, "blockfs.json"))
	require.NoError(t, err)
	assert.Equal(t, manifest, after, "nothing written to the dataset")
	_, err = os.Stat(filepath.Join(dir, "x"))
	assert.True(t, os.IsNotExist(err), "failed packs leave nothing")
}

func TestInfo(t *testing.T) {
	p := packRaw(t, 100, "64KiB", "--seed", "4")
	out := mustRun(t, "info", p.dir)
	for _, want := range []string{"100 fixed-size, 4.0 KiB each", "400 KiB (409600 bytes)", "7, 16 KiB to 64 KiB", "yes, seed 4"} {
		assert.Contains(t, out, want)
	}
	out = mustRun(t, "--help")
	for _, cmd := range []string{"pack", "mount", "unmount", "info"} {
		assert.Contains(t, out, cmd)
	}
	out = mustRun(t, "mount", "--help")
	assert.Contains(t, out, "--mix")
	assert.Contains(t, out, "x block size")
}
