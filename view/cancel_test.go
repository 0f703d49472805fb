package view

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

// cancelling is a source that cancels a context once it has served after loads.
type cancelling struct {
	source.Blocks
	loads  atomic.Int64
	after  int64
	cancel context.CancelFunc
}

func (c *cancelling) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	if c.loads.Add(1) == c.after {
		c.cancel()
	}
	return c.Blocks.Fill(ctx, id, off, bufs, how)
}

// TestReadStopsWhenInterrupted: a read whose context ends (the kernel interrupts a killed
// reader's request; go-fuse cancels every request when the mount goes away) stops within a few
// page loads, even though each load it makes finishes at once: it used to load every page the
// read covers (a 1 MiB read of a window of 512 small blocks through a cache of 8 pages, here
// 512 loads; 135,000 on a mount of a million tiny blocks), so blockfs unmount left the daemon
// running until it was done.
func TestReadStopsWhenInterrupted(t *testing.T) {
	const rs, blocks, per = 8, 512, 512 // 4 KiB blocks of 8-byte records
	p := filepath.Join(t.TempDir(), "rows.bin")
	require.NoError(t, os.WriteFile(p, make([]byte, rs*blocks*per), 0o644))
	ds, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: rs, BlockSize: rs * per})
	require.NoError(t, err)
	for _, regular := range []bool{true, false} {
		ctx, cancel := context.WithCancel(bg)
		src := &cancelling{Blocks: local.New(ds, false), after: 10, cancel: cancel}
		c, err := cache.New(src, cache.Options{Size: 8 * 4096, PageSize: 4096, MaxRead: 4096, Workers: 1})
		require.NoError(t, err)
		set, err := NewSet(ds, c, SetOptions{Order: shuffle.Options{Seed: 1, Mix: blocks}})
		require.NoError(t, err)
		e, err := set.Epoch(0)
		require.NoError(t, err)
		f, err := e.Open(bg, Data, e.All())
		require.NoError(t, err)
		buf := make([]byte, 1<<20)
		g := NewGather()
		if regular {
			_, err = f.(*dataFile).gather(call{ctx: ctx}, g, buf, 0)
		} else {
			// The span path, as windows of short segments take.
			err = f.(*dataFile).copyRest(call{ctx: ctx}, g, buf, 0, 0, 0)
		}
		g.Release()
		assert.True(t, errors.Is(err, context.Canceled), "regular %v: the read ends with its context: %v", regular, err)
		assert.Less(t, src.loads.Load(), int64(40), "regular %v: it stops within a few loads of the cancel", regular)
		c.Close()
		cancel()
	}
}
