package test

import (
	"bytes"
	"context"
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

// The files blockfs reads because a user named them (docs/RELIABILITY.md, "Hostile and huge
// inputs"): none may hang it or make it grow without bound, and every dataset shape keeps the
// mount within its memory bound and answers its first read.

// runWithin runs blockfs with args, killing it after limit: it returns stdout, stderr, the
// exit code and how long it took, and fails the test if it had to be killed.
func runWithin(t *testing.T, limit time.Duration, args ...string) (string, string, int, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	require.NoError(t, ctx.Err(), "blockfs %v did not finish within %v: %s", args, limit, errb.String())
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running blockfs %v: %v", args, err)
	}
	return out.String(), errb.String(), code, took
}

// oneLine requires stderr to be one line holding want.
func oneLine(t *testing.T, errs, want string, args ...any) {
	t.Helper()
	assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q %v", errs, args)
	assert.Contains(t, errs, want, args...)
}

// TestSegmentsFileRefused: a --segments that is a FIFO (reading it would wait for a writer
// forever), /dev/zero (it never ends: the map grew 192 MB -> 1 GB in 6 s) or a file over the
// 1 GiB limit is refused within 5 s, in one line saying what it is, by mount, order and info;
// so are a dataset's manifest and --labels that are FIFOs.
func TestSegmentsFileRefused(t *testing.T) {
	dir := t.TempDir()
	npy := float32Npy(t, dir, 100, 4, func(r, c int) float32 { return float32(r) })
	fifo := filepath.Join(dir, "segments.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	huge := sparseFile(t, "huge.json", 1<<30+1)
	mnt := t.TempDir()
	for _, c := range []struct{ segs, want string }{
		{fifo, fifo + ": a named pipe (FIFO), not a regular file"},
		{"/dev/zero", "/dev/zero: a character device, not a regular file"},
		{huge, "1.0 GiB, more than the limit of 1.0 GiB"},
	} {
		for _, cmd := range [][]string{{"mount", npy, mnt}, {"order", "--ids", npy}, {"info", npy}} {
			args := append([]string{cmd[0], "--window", "5", "--segments", c.segs}, cmd[1:]...)
			_, errs, code, took := runWithin(t, 5*time.Second, args...)
			t.Logf("%v: exit %d after %v", args, code, took.Round(time.Millisecond))
			assert.Equal(t, 1, code, args)
			oneLine(t, errs, c.want, args)
		}
	}
	assert.False(t, isMounted(mnt))

	// The same check guards a dataset's manifest and --labels.
	ds := filepath.Join(t.TempDir(), "ds")
	require.NoError(t, os.Mkdir(ds, 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(ds, "blockfs.json"), 0o644))
	_, errs, code, _ := runWithin(t, 5*time.Second, "info", ds)
	assert.Equal(t, 1, code)
	oneLine(t, errs, "blockfs.json: a named pipe (FIFO), not a regular file")
	_, errs, code, _ = runWithin(t, 5*time.Second, "order", "--stats", "--labels", fifo, npy)
	assert.Equal(t, 1, code)
	oneLine(t, errs, "--labels: open "+fifo+": a named pipe (FIFO), not a regular file")
}

// TestOrderInfoNeedALiveMount: blockfs order and info read a mountpoint's .blockfs/info.json
// only where a blockfs mount is (a fuse.blockfs mount at DIR in /proc/self/mountinfo). A
// directory anyone made with a crafted info.json (pointing --segments at a FIFO, or itself a
// FIFO) is refused within 5 s in one line, instead of hanging them; a real mount is read.
func TestOrderInfoNeedALiveMount(t *testing.T) {
	dir := t.TempDir()
	npy := float32Npy(t, dir, 100, 4, func(r, c int) float32 { return float32(r) })
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	crafted := filepath.Join(t.TempDir(), "not-a-mount")
	require.NoError(t, os.MkdirAll(filepath.Join(crafted, ".blockfs"), 0o755))
	info, err := json.Marshal(map[string]any{"open_data": npy, "open_flags": []string{"--window=5", "--segments=" + fifo}, "mix": 1, "shuffle": "full"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(crafted, ".blockfs/info.json"), info, 0o644))
	piped := filepath.Join(t.TempDir(), "piped")
	require.NoError(t, os.MkdirAll(filepath.Join(piped, ".blockfs"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(piped, ".blockfs/info.json"), 0o644))
	for _, d := range []string{crafted, piped} {
		for _, args := range [][]string{{"info", d}, {"order", "--ids", d}, {"order", "--stats", d}} {
			_, errs, code, _ := runWithin(t, 5*time.Second, args...)
			assert.Equal(t, 1, code, args)
			oneLine(t, errs, d+" has a .blockfs/info.json but is not a blockfs mount", args)
		}
	}

	m := mount(t, npy, "--window", "5", "--cache-size", "8MiB", "--readahead", "1MiB")
	out, errs, code, _ := runWithin(t, 10*time.Second, "info", m.dir)
	require.Zero(t, code, errs)
	assert.Contains(t, out, "mounted:")
}
