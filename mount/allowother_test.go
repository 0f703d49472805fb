package mount

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/layout"
)

// TestCheckAllowOther: --allow-other is refused, as a usage error naming the opt-in, when a
// file the mount reads is not readable by others or a directory above it is not searchable by
// them, and for an object store; --allow-other-unreadable, or data readable by all, passes.
func TestCheckAllowOther(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	p := filepath.Join(dir, "rows.bin")
	require.NoError(t, os.WriteFile(p, make([]byte, 4096), 0o644))
	ds, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: 64})
	require.NoError(t, err)
	loc := Locate(p)
	on := Options{AllowOther: true}
	require.NoError(t, checkAllowOther(on, loc, ds), "readable by all")

	require.NoError(t, os.Chmod(p, 0o640))
	err = checkAllowOther(on, loc, ds)
	assert.True(t, errors.Is(err, ErrUsage))
	assert.ErrorContains(t, err, "other users cannot read "+p+" (mode 0640)")
	assert.ErrorContains(t, err, "--allow-other-unreadable")
	assert.NoError(t, checkAllowOther(Options{AllowOther: true, AllowOtherUnreadable: true}, loc, ds))
	assert.NoError(t, checkAllowOther(Options{}, loc, ds), "no --allow-other, nothing to check")

	require.NoError(t, os.Chmod(p, 0o644))
	require.NoError(t, os.Chmod(dir, 0o750))
	assert.ErrorContains(t, checkAllowOther(on, loc, ds), "other users cannot reach "+p+" (directory "+dir+" is mode 0750)")

	remote := Location{Kind: Remote, Name: "s3://b/p"}
	assert.ErrorContains(t, checkAllowOther(on, remote, ds), "s3://b/p is read with your credentials")
}
