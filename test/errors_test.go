package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// treeDigest hashes every file's path, size, mode, mtime and content under dir, so a test can
// show that nothing in a dataset changed.
func treeDigest(t *testing.T, dir string) [32]byte {
	t.Helper()
	h := sha256.New()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		h.Write([]byte(p + info.Mode().String() + info.ModTime().String()))
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	}))
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// editManifest rewrites a dataset's manifest through fn.
func editManifest(t *testing.T, dir string, fn func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, "blockfs.json")
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	fn(m)
	raw, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, raw, 0o644))
}

func firstBlock(m map[string]any) map[string]any {
	return m["blocks"].([]any)[0].(map[string]any)
}

// TestDatasetErrors is the dataset half of docs/ERRORS.md: each damaged dataset is refused by
// blockfs mount with exit code 1 and one line naming the file, and nothing in it changes.
func TestDatasetErrors(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		msg    string
	}{
		{"manifest missing", func(t *testing.T, d string) { require.NoError(t, os.Remove(filepath.Join(d, "blockfs.json"))) }, "blockfs.json: no manifest"},
		{"manifest garbled", func(t *testing.T, d string) {
			require.NoError(t, os.WriteFile(filepath.Join(d, "blockfs.json"), []byte(`{"format": "blockfs-dataset", "vers`), 0o644))
		}, "manifest is not valid JSON"},
		{"manifest truncated to nothing", func(t *testing.T, d string) { require.NoError(t, os.Truncate(filepath.Join(d, "blockfs.json"), 0)) }, "manifest is empty"},
		{"unknown format version", func(t *testing.T, d string) { editManifest(t, d, func(m map[string]any) { m["version"] = 9 }) }, "unknown format version 9"},
		{"block file missing", func(t *testing.T, d string) { require.NoError(t, os.Remove(filepath.Join(d, "blocks/000001.bin"))) }, "blocks/000001.bin: block 1: file is missing"},
		{"block file truncated", func(t *testing.T, d string) {
			require.NoError(t, os.Truncate(filepath.Join(d, "blocks/000000.bin"), 100))
		}, "file is 100 bytes, the manifest says 65536"},
		{"block file longer", func(t *testing.T, d string) {
			require.NoError(t, os.Truncate(filepath.Join(d, "blocks/000000.bin"), 70000))
		}, "file is 70000 bytes, the manifest says 65536"},
		{"absolute path", func(t *testing.T, d string) {
			editManifest(t, d, func(m map[string]any) { firstBlock(m)["file"] = "/etc/hostname" })
		}, "absolute paths are not allowed"},
		{"path with ..", func(t *testing.T, d string) {
			editManifest(t, d, func(m map[string]any) { firstBlock(m)["file"] = "../x.bin" })
		}, "leaves the dataset directory"},
		{"symlink out of the dataset", func(t *testing.T, d string) {
			p := filepath.Join(d, "blocks/000000.bin")
			out := filepath.Join(filepath.Dir(d), "outside.bin")
			require.NoError(t, os.Rename(p, out))
			require.NoError(t, os.Symlink(out, p))
		}, "outside the dataset directory"},
		{"record size 0", func(t *testing.T, d string) { editManifest(t, d, func(m map[string]any) { m["record_size"] = 0 }) }, "record_size must be positive"},
		{"counts disagree", func(t *testing.T, d string) { editManifest(t, d, func(m map[string]any) { m["records"] = 5 }) }, "blocks hold 40 records but the manifest says 5"},
		{"count overflow", func(t *testing.T, d string) {
			editManifest(t, d, func(m map[string]any) { firstBlock(m)["records"] = uint64(1) << 62 })
		}, "do not make 65536 bytes"},
		{"empty dataset", func(t *testing.T, d string) {
			editManifest(t, d, func(m map[string]any) { m["blocks"] = []any{}; m["records"] = 0; m["bytes"] = 0 })
		}, "dataset has no records"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := packRaw(t, 40, "64KiB") // 16 records a block: 3 blocks
			c.damage(t, p.dir)
			before := treeDigest(t, p.dir)
			mnt := t.TempDir()
			_, errs, code := run(t, "mount", "--cache-size", "4MiB", "--readahead", "512KiB", p.dir, mnt)
			assert.Equal(t, 1, code, errs)
			assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
			assert.True(t, strings.HasPrefix(errs, "blockfs: "), errs)
			assert.Contains(t, errs, c.msg)
			assert.NotContains(t, errs, "goroutine")
			assert.Equal(t, before, treeDigest(t, p.dir), "nothing in the dataset changed")
			assert.False(t, isMounted(mnt))
		})
	}
}

// TestOnlyTheMounterReads: without --allow-other another user cannot read the mount; with it,
// they can read but not write.
func TestOnlyTheMounterReads(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a reader as another user")
	}
	p := packForAll(t)
	open := func(allow bool) (string, error) {
		mnt := filepath.Join(dirForAll(t), "mnt")
		require.NoError(t, os.Mkdir(mnt, 0o755))
		args := []string{"--cache-size", "4MiB", "--readahead", "512KiB"}
		if allow {
			args = append(args, "--allow-other")
		}
		m := mountAt(t, p.dir, mnt, args...)
		out, err := asNobody("sh", "-c", "head -c 4096 "+m.path("epoch-0000")+" | wc -c; touch "+m.path("x")).CombinedOutput()
		return string(out), err
	}
	out, err := open(false)
	assert.Error(t, err)
	assert.Contains(t, out, "Permission denied", "another user cannot read without --allow-other")
	out, err = open(true)
	assert.Error(t, err, "writes still fail")
	assert.Contains(t, out, "4096", "another user reads with --allow-other")
	assert.Contains(t, out, "Read-only file system")
}

// TestMountWithoutRootSaysWhy: a user without root mounts with --daemon (as blockfs.Mount
// does). Where /dev/fuse is not open to other users (mode 0600, this machine's), the one line
// says so and what to do, through the daemon's readiness pipe; where it is, the mount works.
func TestMountWithoutRootSaysWhy(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the mount as another user")
	}
	p := packForAll(t)
	parent := dirForAll(t)
	mnt := filepath.Join(parent, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	require.NoError(t, os.Chown(mnt, nobody, nobody))
	exe := binaryForAll(t, parent)
	cmd := asNobody(exe, "mount", "--daemon", "--cache-size", "4MiB", "--readahead", "512KiB", p.dir, mnt)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	st, serr := os.Stat("/dev/fuse")
	require.NoError(t, serr)
	if st.Mode().Perm()&0o006 == 0o006 {
		require.NoError(t, err, "/dev/fuse is open to every user: the mount works: %s", stderr.String())
		out, err := asNobody("fusermount3", "-u", mnt).CombinedOutput()
		require.NoError(t, err, string(out))
		return
	}
	require.Error(t, err)
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	msg := stderr.String()
	assert.Equal(t, 1, strings.Count(msg, "\n"), "one line: %s", msg)
	assert.Contains(t, msg, "cannot open /dev/fuse for reading and writing (mode 0600)")
	assert.Contains(t, msg, "uid 65534")
	assert.Contains(t, msg, "Without root, and in containers")
	assert.NotContains(t, msg, "code 256")
}

// nobody is the user the tests run blockfs as when they need one without root.
const nobody = 65534

// packForAll packs a small dataset that every user can read.
func packForAll(t *testing.T) *packed {
	p := packRaw(t, 20, "64KiB")
	for _, dir := range []string{p.dir, filepath.Dir(p.dir), filepath.Dir(filepath.Dir(p.dir))} {
		require.NoError(t, os.Chmod(dir, 0o755))
	}
	return p
}

// dirForAll returns a new directory that every user can enter and list.
func dirForAll(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	return dir
}

// asNobody returns a command that runs name as nobody, with no supplementary groups.
func asNobody(name string, args ...string) *exec.Cmd {
	return exec.Command("setpriv", append([]string{fmt.Sprintf("--reuid=%d", nobody), fmt.Sprintf("--regid=%d", nobody), "--clear-groups", name}, args...)...)
}

// binaryForAll copies the tests' blockfs into dir (made by dirForAll), where every user can
// run it (the tests' own copy is in a directory of root's), and returns its path.
func binaryForAll(t *testing.T, dir string) string {
	t.Helper()
	exe := filepath.Join(dir, "blockfs")
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(exe, data, 0o755))
	return exe
}
