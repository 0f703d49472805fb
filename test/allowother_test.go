package test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAllowOtherChecksTheData: --allow-other serves the mount to every user; over a dataset
// that other users cannot read themselves (pack leaves it as private as its directories: a
// test's are 0700) it is refused in one line naming the opt-in, --allow-other-unreadable,
// which serves it anyway. A dataset readable by all mounts as before (TestOnlyTheMounterReads
// reads it as another user).
func TestAllowOtherChecksTheData(t *testing.T) {
	requireFUSE(t)
	private := packRaw(t, 20, "64KiB")
	mnt := t.TempDir()
	_, errs, code, _ := runWithin(t, 10*time.Second, "mount", "--allow-other", private.dir, mnt)
	assert.Equal(t, 2, code)
	oneLine(t, errs, "--allow-other: other users cannot reach "+filepath.Join(private.dir, "blockfs.json"))
	assert.Contains(t, errs, "give --allow-other-unreadable to serve it to every user anyway")

	dir := dirForAll(t)
	file := filepath.Join(dir, "rows.bin")
	require.NoError(t, os.WriteFile(file, make([]byte, 1<<20), 0o600))
	_, errs, code, _ = runWithin(t, 10*time.Second, "mount", "--allow-other", "--record-size", "4096", file, mnt)
	assert.Equal(t, 2, code)
	oneLine(t, errs, "--allow-other: other users cannot read "+file+" (mode 0600)")

	m := mount(t, private.dir, "--allow-other", "--allow-other-unreadable", "--cache-size", "8MiB", "--readahead", "1MiB")
	_, err := os.Stat(m.path("epoch-0000"))
	assert.NoError(t, err)
	m.stop()
	require.NoError(t, os.Chmod(file, 0o644))
	mount(t, file, "--allow-other", "--record-size", "4096", "--cache-size", "8MiB", "--readahead", "1MiB")
	_, errs, code, _ = runWithin(t, 10*time.Second, "mount", "--allow-other-unreadable", file, t.TempDir())
	assert.Equal(t, 2, code)
	oneLine(t, errs, "--allow-other-unreadable goes with --allow-other")
}
