package mount

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

// TestOpenColumns: data opened without a mount serves the ids of an epoch, and of a shard of
// it, as the reference order of docs/SHUFFLE.md has them, through the builder Serve uses.
func TestOpenColumns(t *testing.T) {
	ref := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 3000, 64, 4096, true)
	d, err := Open(Options{Data: ref.Dir, Order: shuffle.Options{Seed: 7, Mix: 2}})
	require.NoError(t, err)
	defer d.Close()
	assert.Empty(t, d.Warnings())
	ds, opt := d.Order()
	require.NotNil(t, ds)
	assert.Equal(t, 2, opt.Mix)
	n, err := d.Records(3)
	require.NoError(t, err)
	require.EqualValues(t, 3000, n)
	for _, sh := range []Shard{{}, {R: 1, W: 3}, {R: 6, W: 7}} {
		lo, hi := sh.Positions(n)
		r, err := d.Column(3, IDs, sh)
		require.NoError(t, err)
		got, err := io.ReadAll(r)
		require.NoError(t, err)
		o := opt
		o.Epoch = 3
		_, want, _ := ref.Epoch(o, lo, hi)
		assert.Equal(t, want, got, "shard %+v", sh)
	}
	stored, err := StoredIDs(ds)
	require.NoError(t, err)
	assert.Equal(t, ref.Stored, stored)
	man, _ := d.Fields()
	assert.Nil(t, man)
	order, _, err := d.Mixture()
	assert.NoError(t, err)
	assert.Nil(t, order)
}

// TestColumnFile: the names of a mount's columns, as order reads them from a mount point.
func TestColumnFile(t *testing.T) {
	assert.Equal(t, "epoch-0003.ids", ColumnFile(3, IDs, Shard{}))
	assert.Equal(t, "shard-1-of-4/epoch-0012.source", ColumnFile(12, Sources, Shard{R: 1, W: 4}))
	lo, hi := Shard{R: 2, W: 3}.Positions(10)
	assert.Equal(t, [2]uint64{6, 9}, [2]uint64{lo, hi}, "the remainder belongs to no shard")
}

// TestOpenRefuses: reading is refused where a mount would refuse the data or its options.
func TestOpenRefuses(t *testing.T) {
	_, err := Open(Options{Data: filepath.Join(t.TempDir(), "missing")})
	assert.Error(t, err)
	ref := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 100, 8, 256, false)
	_, err = Open(Options{Data: ref.Dir, InPlace: InPlace{RecordSize: 8}})
	assert.True(t, errors.Is(err, ErrUsage), "%v", err)
}

// TestVerifyDataset: Verify reads a sound dataset whole.
func TestVerifyDataset(t *testing.T) {
	ref := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 500, 16, 1024, true)
	var problems []error
	res, err := Verify(Options{Data: ref.Dir}, func(err error) { problems = append(problems, err) })
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Zero(t, res.Problems)
	assert.Equal(t, len(ref.Counts), res.Blocks)
}
