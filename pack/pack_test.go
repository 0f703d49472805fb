package pack

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

func writeInput(t *testing.T, n, rs int) (string, []byte) {
	t.Helper()
	data := make([]byte, n*rs)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(data[i*rs:], uint32(i))
	}
	p := filepath.Join(t.TempDir(), "in.bin")
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p, data
}

// storedIDs returns the source id of each stored record, read from the record itself.
func storedIDs(t *testing.T, dir string, rs int) [][]uint32 {
	ds, err := local.Open(dir)
	require.NoError(t, err)
	var out [][]uint32
	for b := 0; b < ds.Blocks(); b++ {
		buf := make([]byte, ds.BlockBytes(b))
		require.NoError(t, local.New(ds, false).Fill(context.Background(), layout.DataFile(b), 0, [][]byte{buf}, source.Read{}))
		var ids []uint32
		for i := 0; i < len(buf); i += rs {
			ids = append(ids, binary.LittleEndian.Uint32(buf[i:]))
		}
		if ds.HasIDs() {
			raw := make([]byte, 8*ds.BlockRecords(b))
			require.NoError(t, local.New(ds, false).Fill(context.Background(), layout.IDsFile(b), 0, [][]byte{raw}, source.Read{}))
			for i, id := range ids {
				require.EqualValues(t, id, binary.LittleEndian.Uint64(raw[8*i:]), "ids file matches the data")
			}
		}
		out = append(out, ids)
	}
	return out
}

func TestNoShuffleKeepsOrder(t *testing.T) {
	src, _ := writeInput(t, 100, 32)
	dst := filepath.Join(t.TempDir(), "ds")
	res, err := Pack(context.Background(), src, dst, Options{Format: Raw, RecordSize: 32, BlockSize: 320, NoShuffle: true})
	m := res.Manifest
	require.NoError(t, err)
	assert.Len(t, m.Blocks, 10)
	assert.False(t, m.PreShuffle.Shuffled)
	for b, ids := range storedIDs(t, dst, 32) {
		for i, id := range ids {
			assert.EqualValues(t, b*10+i, id, "record i lands in block i / records-per-block")
		}
	}
	// Input bytes are preserved: the block files concatenated are the input.
	in, _ := os.ReadFile(src)
	var all []byte
	for b := 0; b < 10; b++ {
		blk, _ := os.ReadFile(filepath.Join(dst, m.Blocks[b].File))
		all = append(all, blk...)
	}
	assert.True(t, bytes.Equal(in, all))
}

func TestPreShuffle(t *testing.T) {
	const n, rs = 1000, 16
	src, _ := writeInput(t, n, rs)
	pack := func(seed uint64, mem int64) [][]uint32 {
		dst := filepath.Join(t.TempDir(), "ds")
		res, err := Pack(context.Background(), src, dst, Options{Format: Raw, RecordSize: rs, BlockSize: 100 * rs, Seed: seed, ScatterMemory: mem, BucketBytes: 3000})
		require.NoError(t, err)
		m := res.Manifest
		assert.True(t, m.PreShuffle.Shuffled)
		assert.Equal(t, seed, m.PreShuffle.Seed)
		return storedIDs(t, dst, rs)
	}
	a := pack(1, 0)
	assert.Equal(t, a, pack(1, 1), "same seed, same layout, whatever the scatter memory")
	assert.NotEqual(t, a, pack(2, 0))
	seen := make([]bool, n)
	spread := 0
	for b, ids := range a {
		assert.Len(t, ids, 100)
		lo, hi := uint32(n), uint32(0)
		for _, id := range ids {
			require.False(t, seen[id])
			seen[id] = true
			lo, hi = min(lo, id), max(hi, id)
		}
		if hi-lo > n/2 {
			spread++
		}
		_ = b
	}
	assert.GreaterOrEqual(t, spread, 8, "blocks draw from the whole input")
}

func TestRefusals(t *testing.T) {
	src, _ := writeInput(t, 10, 10)
	dir := t.TempDir()
	_, err := Pack(context.Background(), src, filepath.Join(dir, "a"), Options{Format: Raw, RecordSize: 3})
	assert.ErrorContains(t, err, "not a multiple of the record size 3 (1 bytes left over)")
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err = Pack(context.Background(), empty, filepath.Join(dir, "b"), Options{Format: Raw, RecordSize: 4})
	assert.ErrorContains(t, err, "empty")
	_, err = Pack(context.Background(), filepath.Join(dir, "missing"), filepath.Join(dir, "c"), Options{Format: Raw, RecordSize: 4})
	assert.ErrorContains(t, err, "cannot read the input")
	existing := filepath.Join(dir, "existing")
	require.NoError(t, os.Mkdir(existing, 0o755))
	_, err = Pack(context.Background(), src, existing, Options{Format: Raw, RecordSize: 10})
	assert.ErrorIs(t, err, layout.ErrExists)
}

func TestInterruptedLeavesNothing(t *testing.T) {
	src, _ := writeInput(t, 200000, 64)
	dir := t.TempDir()
	existing := filepath.Join(dir, "ds")
	_, err := Pack(context.Background(), src, existing, Options{Format: Raw, RecordSize: 64, BlockSize: 6400})
	require.NoError(t, err)
	before, _ := os.ReadFile(filepath.Join(existing, layout.ManifestName))
	for _, noShuffle := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		_, err = Pack(ctx, src, existing, Options{Format: Raw, RecordSize: 64, BlockSize: 6400, Force: true, NoShuffle: noShuffle,
			Progress: func(int64, int64, uint64) {
				if calls++; calls == 2 {
					cancel()
				}
			}})
		assert.ErrorContains(t, err, "interrupted")
		after, _ := os.ReadFile(filepath.Join(existing, layout.ManifestName))
		assert.Equal(t, before, after, "an existing dataset survives an interrupted --force pack")
		ents, _ := os.ReadDir(dir)
		assert.Len(t, ents, 1, "no temporary directory left")
	}
}

func TestAutoBlockSize(t *testing.T) {
	for _, c := range []struct{ in, rs, want int64 }{
		{1 << 40, 0, layout.DefaultBlockSize}, // large: the default
		{64 * layout.DefaultBlockSize, 0, layout.DefaultBlockSize},
		{47_040_000, 784, 179 * 4096},   // Fashion-MNIST: 65 blocks, not 3
		{10 << 20, 0, MinAutoBlockSize}, // small: never below the minimum
		{0, 0, MinAutoBlockSize},
		{10 << 20, 1 << 20, 1 << 20}, // at least one record
	} {
		assert.Equal(t, c.want, AutoBlockSize(c.in, c.rs), "input %d, record %d", c.in, c.rs)
	}
	// Without a block size, pack chooses one and says so; the dataset has at least 64 blocks.
	src, _ := writeInput(t, 32<<10, 1024) // 32 MiB
	res, err := Pack(context.Background(), src, filepath.Join(t.TempDir(), "ds"), Options{Format: Raw, RecordSize: 1024})
	require.NoError(t, err)
	assert.True(t, res.AutoBlock)
	assert.EqualValues(t, 512<<10, res.BlockSize)
	assert.Len(t, res.Manifest.Blocks, 64)
}
