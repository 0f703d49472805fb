package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusedInOneLine runs blockfs with args and checks it exits code with one line on stderr
// that holds every want, and no panic trace.
func refusedInOneLine(t *testing.T, code int, args []string, want ...string) {
	t.Helper()
	_, errs, got := run(t, args...)
	assert.Equal(t, code, got, "exit code of blockfs %v; stderr: %s", args, errs)
	assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
	assert.True(t, strings.HasPrefix(errs, "blockfs: "), errs)
	assert.NotContains(t, errs, "goroutine")
	for _, w := range want {
		assert.Contains(t, errs, w, "blockfs %v", args)
	}
}

// TestMissingFileInPlace: a file to serve in place (--record-size, --dtype) that does not
// exist, the commonest typo, is called missing, by name, by mount, info, order and a
// mixture's source, never "a dataset directory"; a near name in its folder is offered, and a
// missing folder is named. A dataset directory given --record-size still says what it is.
func TestMissingFileInPlace(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "train.bin")
	require.NoError(t, os.WriteFile(raw, make([]byte, 4096), 0o644))
	p := packRaw(t, 8, "64KiB")
	mnt := t.TempDir()
	typo := filepath.Join(dir, "trian.bin")
	gone := filepath.Join(dir, "nope", "train.bin")
	mix := filepath.Join(dir, "mix.json")
	require.NoError(t, os.WriteFile(mix, []byte(`{"sources": [{"data": "train.bin", "weight": 1, "options": {"record_size": 8}}, `+
		`{"data": "trian.bin", "weight": 1, "options": {"record_size": 8}}]}`), 0o644))
	notThere := " does not exist: --record-size serves an existing file in place; check the path"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"mount", "/nonexistent.bin", mnt, "--record-size", "4"}, []string{"blockfs: /nonexistent.bin" + notThere}},
		{[]string{"info", "/nonexistent.bin", "--record-size", "4"}, []string{"blockfs: /nonexistent.bin" + notThere}},
		{[]string{"order", "--ids", "/nonexistent.bin", "--record-size", "4"}, []string{"blockfs: /nonexistent.bin" + notThere}},
		{[]string{"info", typo, "--record-size", "8"}, []string{typo + notThere + " (did you mean " + raw + "?)"}},
		{[]string{"info", gone, "--record-size", "8"}, []string{gone + notThere + " (" + filepath.Dir(gone) + " does not exist either)"}},
		{[]string{"info", filepath.Join(dir, "TRAIN.bin"), "--dtype", "f4"}, []string{"TRAIN.bin does not exist: --dtype serves", "(did you mean " + raw + "?)"}},
		{[]string{"info", mix}, []string{"mix.json: source 1 (trian.bin): " + typo + notThere + " (did you mean " + raw + "?)"}},
		{[]string{"mount", mix, mnt}, []string{"mix.json: source 1 (trian.bin): " + typo + notThere}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			refusedInOneLine(t, 1, c.args, c.want...)
			assert.False(t, isMounted(mnt))
		})
	}
	refusedInOneLine(t, 2, []string{"info", p.dir, "--record-size", "8"}, "--record-size is for a file served in place; "+p.dir+" is a dataset directory")
}
