package mount

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/local"
)

// sparse makes a raw file of size bytes that reads as zeros and takes no disk.
func sparse(t *testing.T, size int64) string {
	p := filepath.Join(t.TempDir(), "data.bin")
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
	return p
}

func TestChooseOrder(t *testing.T) {
	full := shuffle.Options{Mode: shuffle.Full}
	t.Run("pre-shuffled pack: one block a window", func(t *testing.T) {
		d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 4000, 64, 4096, true)
		ds, err := local.Open(d.Dir)
		require.NoError(t, err)
		opt, ch := ChooseOrder(ds, full)
		assert.Equal(t, 1, opt.Mix)
		assert.True(t, ch.Auto)
		assert.False(t, ch.InOrder)
		assert.Empty(t, ch.Warning)
	})
	t.Run("in order, small: one window of everything", func(t *testing.T) {
		ds, err := layout.OpenFlat(sparse(t, 120_000_000), layout.FlatOptions{RecordSize: 2000})
		require.NoError(t, err)
		opt, ch := ChooseOrder(ds, full)
		assert.Equal(t, ds.Blocks(), opt.Mix)
		assert.Equal(t, 115, ds.Blocks(), "1 MiB logical blocks")
		assert.InDelta(t, ch.Uniform, ch.Spread, 0.01*ch.Uniform)
		assert.Contains(t, ch.Why, "one window of all 115 blocks")
		assert.Empty(t, ch.Warning)
	})
	t.Run("in order, large: windows of 512 MiB", func(t *testing.T) {
		ds, err := layout.OpenFlat(sparse(t, 8<<30), layout.FlatOptions{RecordSize: 4096})
		require.NoError(t, err)
		opt, ch := ChooseOrder(ds, full)
		assert.Equal(t, 512, opt.Mix)
		assert.GreaterOrEqual(t, ch.Spread, 0.7*ch.Uniform)
		assert.Empty(t, ch.Warning)
		// What the issue found: 16 MiB blocks and --mix 1 over data in order.
		coarse, err := layout.OpenFlat(sparse(t, 8<<30), layout.FlatOptions{RecordSize: 4096, BlockSize: 16 << 20})
		require.NoError(t, err)
		given := full
		given.Mix = 1
		_, ch = ChooseOrder(coarse, given)
		assert.False(t, ch.Auto)
		assert.Contains(t, ch.Warning, "the order is far from uniform")
		assert.Contains(t, ch.Warning, "leave out --mix and --block-size")
	})
	t.Run("tiny records: version 2 mixes 512 MiB; version 1's order state held it to 8 blocks", func(t *testing.T) {
		ds, err := layout.OpenFlat(sparse(t, 1<<30), layout.FlatOptions{RecordSize: 2})
		require.NoError(t, err)
		opt, ch := ChooseOrder(ds, full)
		assert.Equal(t, 512, opt.Mix, "512 MiB of 1 MiB blocks of 2-byte records")
		assert.Empty(t, ch.Warning)
		assert.Equal(t, []int{shuffle.Version2}, ch.Versions, "version 1 chose another window")
		v1 := full
		v1.Version = shuffle.Version1
		opt, ch = ChooseOrder(ds, v1)
		assert.Equal(t, 8, opt.Mix, "2^22 records of 2 bytes: 8 blocks of 1 MiB")
		assert.Contains(t, ch.Warning, "held down by its order state in order version 1")
		assert.Contains(t, ch.Warning, "leave out --order-version")
		assert.Equal(t, []int{shuffle.Version1}, ch.Versions)
	})
	t.Run("records of variable length keep the 2^22-record window in version 2", func(t *testing.T) {
		ds := variableInOrder(t)
		assert.Equal(t, autoMix(ds, shuffle.Version1), autoMix(ds, shuffle.Version2))
		_, ch := ChooseOrder(ds, full)
		assert.Equal(t, []int{shuffle.Version1, shuffle.Version2}, ch.Versions, "windows this small are the same in both")
	})
	t.Run("blocks and none have no windows", func(t *testing.T) {
		ds, err := layout.OpenFlat(sparse(t, 1<<30), layout.FlatOptions{RecordSize: 4096})
		require.NoError(t, err)
		opt, ch := ChooseOrder(ds, shuffle.Options{Mode: shuffle.Blocks})
		assert.Equal(t, 1, max(1, opt.Mix))
		assert.Contains(t, ch.Warning, "far from uniform")
	})
}

func TestAutoWindowFitsTheCacheSize(t *testing.T) {
	ds, err := layout.OpenFlat(sparse(t, 8<<30), layout.FlatOptions{RecordSize: 4096})
	require.NoError(t, err)
	p := &Plan{ds: ds, opt: Options{Order: shuffle.Options{Mode: shuffle.Full}}}
	p.opt.Order, p.order = ChooseOrder(ds, p.opt.Order)
	p.fitWindow(256<<20, 64<<20, sysmem.Memory{}, 1, 0)
	assert.Equal(t, 64, p.opt.Order.Mix, "(half of 256 MiB - 64 MiB readahead) / 1 MiB blocks")
	assert.Contains(t, p.order.Why, "lowered to 64 blocks: the window and readahead must fit half the --cache-size, 128 MiB")
}

func TestAutoBlockSize(t *testing.T) {
	for _, c := range []struct{ size, unit, want int64 }{
		{100, 8, 1 << 20},
		{8 << 30, 4096, 1 << 20},
		{1 << 40, 4096, 4 << 20},           // at most 2^20 blocks
		{1 << 30, 3 << 20, 3 << 20},        // a unit larger than 1 MiB
		{1 << 30, 1<<20 + 1, 1<<20 + 4096}, // rounded up to 4 KiB
	} {
		assert.Equal(t, c.want, layout.AutoBlockSize(c.size, c.unit), "%+v", c)
	}
}

// TestNodeOrderVersions: a node-aware mount's order is the same in both versions only where no
// part's window (of any node) holds more than 2^22 records.
func TestNodeOrderVersions(t *testing.T) {
	full := shuffle.Options{Mode: shuffle.Full}
	for _, c := range []struct {
		rs   int64
		want []int
	}{{2, []int{2}}, {4096, []int{1, 2}}} {
		ds, err := layout.OpenFlat(sparse(t, 1<<30), layout.FlatOptions{RecordSize: c.rs})
		require.NoError(t, err)
		np := &nodesPlan{blocks: shuffle.PartBlocks(ds.Blocks(), 4, 0)}
		assert.Equal(t, c.want, np.versions(ds, full, 16), "records of %d bytes", c.rs)
		assert.Equal(t, []int{1, 2}, np.versions(ds, shuffle.Options{Mode: shuffle.Blocks}, 16))
	}
}

// TestFieldsWindowBoundVariable: the shared automatic window of a dataset with fields whose
// largest field has tiny fixed-size records keeps 2^22 records where another field cut at the
// samples has records of variable length (its window's byte layout is 16 bytes a record).
func TestFieldsWindowBoundVariable(t *testing.T) {
	big, err := layout.OpenFlat(sparse(t, 1<<30), layout.FlatOptions{RecordSize: 2})
	require.NoError(t, err)
	text := variableInOrder(t)
	mk := func(ds *layout.Dataset) *Plan {
		p := &Plan{ds: ds}
		p.opt.Order, p.order = ChooseOrder(ds, shuffle.Options{Mode: shuffle.Full})
		return p
	}
	for _, c := range []struct {
		name string
		srcs []*Plan
		want int
	}{{"fixed fields only", []*Plan{mk(big)}, 512}, {"and a variable field", []*Plan{mk(big), mk(text)}, 8}} {
		f := &fieldsPlan{man: &layout.FieldsManifest{Fields: make([]layout.Field, len(c.srcs))}, srcs: c.srcs}
		f.boundVariable()
		assert.Equal(t, c.want, f.srcs[0].opt.Order.Mix, c.name)
	}
}

// variableInOrder packs 3000 records of 1 to 7 bytes in 4 KiB blocks, stored in order.
func variableInOrder(t *testing.T) *layout.Dataset {
	lengths := make([]int, 3000)
	for i := range lengths {
		lengths[i] = 1 + i%7
	}
	d := dstest.Variable(t, filepath.Join(t.TempDir(), "ds"), lengths, 4096, false)
	ds, err := local.Open(d.Dir)
	require.NoError(t, err)
	return ds
}
