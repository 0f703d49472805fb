package test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A dataset with fields whose blockfs-fields.json was edited, or whose fields/ leads out of
// it, is refused by mount, info and verify in one line naming the field: the top manifest's
// kind, record size, dtype and shape are each field's own blockfs.json's (a reader decodes
// values by them), its records are theirs, a field's name is one pack writes, and fields/ and
// fields/NAME resolve inside the dataset, as a plain dataset's blocks/ must.

// editFields rewrites the blockfs-fields.json of the dataset with fields in dir with fn.
func editFields(t *testing.T, dir string, fn func(m map[string]any, fields []map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "blockfs-fields.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	var fields []map[string]any
	for _, f := range m["fields"].([]any) {
		fields = append(fields, f.(map[string]any))
	}
	fn(m, fields)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, out, 0o644))
}

// moveOut moves dir/rel out of the dataset, to a directory of its own, and leaves a symlink to
// it in its place.
func moveOut(t *testing.T, dir, rel string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(rel))
	require.NoError(t, os.Rename(filepath.Join(dir, rel), out))
	require.NoError(t, os.Symlink(out, filepath.Join(dir, rel)))
}

// mountRefused runs blockfs mount of data and returns its stderr and exit code; a mount that
// comes up instead (the refusal missing) is unmounted and fails the test.
func mountRefused(t *testing.T, data string) (string, int) {
	t.Helper()
	mnt := t.TempDir()
	var errb bytes.Buffer
	cmd := exec.Command(bin, "mount", data, mnt)
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case err := <-done:
			if ee, ok := err.(*exec.ExitError); ok {
				return errb.String(), ee.ExitCode()
			}
			require.NoError(t, err)
			return errb.String(), 0
		case <-deadline:
		case <-time.After(20 * time.Millisecond):
			if !isMounted(mnt) {
				continue
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if isMounted(mnt) {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		t.Fatalf("blockfs mount served %s: %s", data, errb.String())
	}
}

func TestFieldsManifestTampered(t *testing.T) {
	clean := filepath.Join(t.TempDir(), "ds")
	mustRun(t, "pack", "--quiet", "--columns", "row,img.bytes,name", "--block-size", "4KiB", "testdata/parquet/types.parquet", clean)
	field := func(fields []map[string]any, name string) map[string]any {
		for _, f := range fields {
			if f["name"] == name {
				return f
			}
		}
		t.Fatalf("no field %q", name)
		return nil
	}
	edit := func(fn func(m map[string]any, fields []map[string]any)) func(t *testing.T, d string) {
		return func(t *testing.T, d string) { editFields(t, d, fn) }
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   []string // in the message
	}{
		{"dtype", edit(func(_ map[string]any, fs []map[string]any) { field(fs, "row")["dtype"] = "<f8" }),
			[]string{`field "row"`, "dtype <f8", "dtype <i8", "pack the dataset again"}},
		{"dtype and shape of other bytes", edit(func(_ map[string]any, fs []map[string]any) {
			f := field(fs, "row")
			f["dtype"], f["shape"] = "<f8", []int{3}
		}), []string{`field "row"`, "dtype <f8 shape [3]", "dtype <i8 shape []"}},
		{"dtype and shape of as many bytes", edit(func(_ map[string]any, fs []map[string]any) {
			f := field(fs, "row")
			f["dtype"], f["shape"] = "<f4", []int{2}
		}), []string{`field "row"`, "dtype <f4 shape [2]", "dtype <i8 shape []"}},
		{"record size", edit(func(_ map[string]any, fs []map[string]any) { field(fs, "row")["record_size"] = 4 }),
			[]string{`field "row"`, "4-byte fixed records", "8-byte fixed records"}},
		{"kind", edit(func(_ map[string]any, fs []map[string]any) {
			f := field(fs, "name")
			f["kind"], f["record_size"] = "fixed", 4
		}), []string{`field "name"`, "4-byte fixed records", "variable records"}},
		{"records", edit(func(m map[string]any, _ []map[string]any) { m["records"] = 4999 }),
			[]string{"has 5000 records; blockfs-fields.json says 4999"}},
		{"name with ..", edit(func(_ map[string]any, fs []map[string]any) {
			f := field(fs, "row")
			f["name"], f["dir"] = "../fields/row", "fields/row"
		}), []string{`field name "../fields/row" is not one pack writes`}},
		{"name of a sidecar", func(t *testing.T, d string) {
			require.NoError(t, os.Rename(filepath.Join(d, "fields", "name"), filepath.Join(d, "fields", "ids")))
			editFields(t, d, func(_ map[string]any, fs []map[string]any) {
				f := field(fs, "name")
				f["name"], f["dir"] = "ids", "fields/ids"
			})
		}, []string{`field name "ids" is not one pack writes`}},
		{"fields symlinked out", func(t *testing.T, d string) { moveOut(t, d, "fields") },
			[]string{"fields/row", "outside the dataset directory"}},
		{"a field symlinked out", func(t *testing.T, d string) { moveOut(t, d, filepath.Join("fields", "name")) },
			[]string{"fields/name", `field "name" resolves to`, "outside the dataset directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds := filepath.Join(t.TempDir(), "ds")
			sh(t, "cp -a "+clean+" "+ds)
			c.damage(t, ds)
			for _, cmd := range []string{"info", "verify", "mount"} {
				var errs string
				var code int
				if cmd == "mount" {
					errs, code = mountRefused(t, ds)
				} else {
					_, errs, code = run(t, cmd, ds)
				}
				assert.Equal(t, 1, code, "%s: %s", cmd, errs)
				assert.NotContains(t, errs, "goroutine", cmd)
				for _, w := range c.want {
					assert.Contains(t, errs, w, cmd)
				}
				if cmd != "verify" { // verify prints each problem, then a count
					assert.Equal(t, 1, strings.Count(errs, "\n"), "%s: one line: %q", cmd, errs)
				}
			}
		})
	}
	// The dataset as packed is served.
	assert.Contains(t, mustRun(t, "verify", clean), "ok")
}
