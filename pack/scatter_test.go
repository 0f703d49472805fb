package pack

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBucketWriterKeepsFirstError makes every bucket write fail and checks that the first
// error is kept, refuses later writes and is what stop returns, however often it is called.
func TestBucketWriterKeepsFirstError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	bw := newBucketWriter(func(b int) string { return filepath.Join(missing, fmt.Sprint(b)) }, 16)
	// Four writes queue; one more waits for the first to be done: the failure shows by the
	// seventh.
	var err error
	for b := 0; b < 10 && err == nil; b++ {
		err = bw.write(b, append(bw.buffer(), "data"...))
	}
	require.ErrorIs(t, err, fs.ErrNotExist, "the cause is kept")
	assert.ErrorContains(t, err, filepath.Join(missing, "0"), "the first failure is the one kept")
	assert.Equal(t, err, bw.write(99, bw.buffer()), "later writes are refused with it")
	assert.Equal(t, err, bw.stop())
	assert.Equal(t, err, bw.stop(), "stop may be called again")
}
