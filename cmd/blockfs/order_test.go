package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/mount"
)

// order --stats names what it measured: a file served in place by its own path (it named the
// file's folder).
func TestStatsNameOfAFileInPlace(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.bin")
	require.NoError(t, os.WriteFile(file, make([]byte, 64000), 0o644))
	o, err := mount.Decode(file, "", mount.Values{"record-size": "1000"})
	require.NoError(t, err)
	d, err := mount.Open(o)
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, file, statsName(d, file))
}
