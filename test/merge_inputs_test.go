package test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A merge reads what the parts' runs wrote under OUT/parts, where anyone who can write OUT
// (a shared scratch directory, another job) can put something else. TestIndexMergeInputs and
// TestPackMergeInputs: each of a part's files read through the checks any input gets (a
// regular file, inside OUT, of the size its part says, opened without waiting), so that a
// symlink to a file OUT's reader may not read is not copied into OUT, and a FIFO or a device
// is refused at once, in one line, with nothing written.

func TestIndexMergeInputs(t *testing.T) {
	dir := t.TempDir()
	shards := filepath.Join(dir, "shards")
	require.NoError(t, os.Mkdir(shards, 0o755))
	glob, _ := writeShards(t, shards, 300, 100)
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("not for OUT's readers\n"), 0o600))

	cases := []struct {
		name  string
		plant func(path string)
		want  string
	}{
		{"a symlink out of OUT", func(p string) { require.NoError(t, os.Symlink(secret, p)) }, "leads outside"},
		{"a FIFO", func(p string) { require.NoError(t, syscall.Mkfifo(p, 0o644)) }, "named pipe"},
		{"/dev/zero", func(p string) { require.NoError(t, os.Symlink("/dev/zero", p)) }, "leads outside"},
		{"a file of another size", func(p string) { require.NoError(t, os.WriteFile(p, []byte("short"), 0o644)) }, "not the"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("parted-%d", i))
			mustRun(t, "index", "--part", "0/2", glob, out)
			mustRun(t, "index", "--part", "1/2", glob, out)
			// What a merge killed by SIGTERM left behind goes with the next merge.
			require.NoError(t, os.MkdirAll(filepath.Join(out, ".merge-123", "fields"), 0o755))
			values := filepath.Join(out, "parts", "part-1-of-2", "fields", "cls.values")
			require.FileExists(t, values, "the labels are stored in the index")
			require.NoError(t, os.Remove(values))
			c.plant(values)
			_, errs, code, took := runWithin(t, 30*time.Second, "index", "--merge", out)
			assert.Equal(t, 1, code, errs)
			oneLine(t, errs, c.want)
			assert.Contains(t, errs, "index the part again")
			assert.Less(t, took, 10*time.Second)
			assert.NoFileExists(t, filepath.Join(out, "blockfs-index.json"), "no merged index")
			assert.NoDirExists(t, filepath.Join(out, "fields"))
			left, _ := filepath.Glob(filepath.Join(out, ".merge-*"))
			assert.Empty(t, left, "nothing left behind")
		})
	}
}

func TestPackMergeInputs(t *testing.T) {
	_, inputs, _ := partsInputs(t, 40, 40)
	flags := []string{"--format", "raw", "--record-size", fmt.Sprint(partsRecord), "--block-size", "16KiB", "--seed", "3"}
	for i, c := range []struct {
		name  string
		plant func(path string)
		want  string
	}{
		{"a FIFO", func(p string) { require.NoError(t, syscall.Mkfifo(p, 0o644)) }, "named pipe"},
		{"/dev/zero", func(p string) { require.NoError(t, os.Symlink("/dev/zero", p)) }, "character device"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), fmt.Sprintf("out-%d", i))
			packPartsCLI(t, inputs, out, 2, flags...)
			manifest := filepath.Join(out, "parts", "part-1-of-2", "blockfs.json")
			require.FileExists(t, manifest)
			require.NoError(t, os.Remove(manifest))
			c.plant(manifest)
			_, errs, code, took := runWithin(t, 30*time.Second, "pack", "--merge", out)
			assert.Equal(t, 1, code, errs)
			oneLine(t, errs, c.want)
			assert.Less(t, took, 10*time.Second)
			assert.NoFileExists(t, filepath.Join(out, "blockfs.json"), "no merged manifest")
		})
	}
}

// TestMergePartNames: a part's name is read with the bounds pack --part has (0 <= I < N <=
// 2^20). parts/part-5-of-2.json made pack --merge panic (index out of range), and a part
// named part-0-of-1000000000000 ran either merge out of memory; both are one line now.
func TestMergePartNames(t *testing.T) {
	_, inputs, _ := partsInputs(t, 40, 40)
	flags := []string{"--format", "raw", "--record-size", fmt.Sprint(partsRecord), "--block-size", "16KiB", "--seed", "3"}
	for i, name := range []string{"part-5-of-2.json", "part-0-of-1000000000000.json", "part-01-of-2.json"} {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("out-%d", i))
		packPartsCLI(t, inputs, out, 2, flags...)
		raw, err := os.ReadFile(filepath.Join(out, "parts", "part-1-of-2.json"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out, "parts", name), raw, 0o644))
		_, errs, code, _ := runWithin(t, 30*time.Second, "pack", "--merge", out)
		assert.Equal(t, 1, code, errs)
		oneLine(t, errs, name+" is not a part's name")
		assert.NotContains(t, errs, "goroutine")
	}

	dir := t.TempDir()
	shards := filepath.Join(dir, "shards")
	require.NoError(t, os.Mkdir(shards, 0o755))
	glob, _ := writeShards(t, shards, 100, 50)
	out := filepath.Join(dir, "parted")
	mustRun(t, "index", "--part", "0/1", glob, out)
	require.NoError(t, os.Mkdir(filepath.Join(out, "parts", "part-0-of-1000000000000"), 0o755))
	_, errs, code, _ := runWithin(t, 30*time.Second, "index", "--merge", out)
	assert.Equal(t, 1, code, errs)
	oneLine(t, errs, "part-0-of-1000000000000 is not a part's name")
}
