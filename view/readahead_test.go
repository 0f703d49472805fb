package view

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

// recordingSource notes which files the cache reads.
type recordingSource struct {
	source.Blocks
	mu    sync.Mutex
	files map[cache.FileID]bool
}

func (s *recordingSource) Fill(ctx context.Context, id cache.FileID, off int64, bufs [][]byte, how source.Read) error {
	s.mu.Lock()
	s.files[id] = true
	s.mu.Unlock()
	return s.Blocks.Fill(ctx, id, off, bufs, how)
}

func (s *recordingSource) read() []cache.FileID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []cache.FileID
	for id := range s.files {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// TestReadaheadFollowsOrder: a reader at the start of an epoch gets exactly the block files of
// the windows within its readahead distance prefetched, in the epoch's order, for data and ids.
func TestReadaheadFollowsOrder(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 400, 256, 4096, true) // 16 per block, 25 blocks
	ds, err := local.Open(d.Dir)
	require.NoError(t, err)
	src := &recordingSource{Blocks: local.New(ds, false), files: map[cache.FileID]bool{}}
	set := newSet(t, ds, src, cache.Options{Size: 64 * 4096, PageSize: 4096, MaxRead: 4096}, shuffle.Options{Seed: 3, Mode: shuffle.Full, Mix: 2})
	e, err := set.Epoch(1)
	require.NoError(t, err)

	want := func(role layout.Role, windows ...int) []cache.FileID {
		var ids []cache.FileID
		for _, w := range windows {
			for _, b := range e.Order().Window(w).Blocks {
				id := layout.DataFile(b)
				if role == layout.RoleIDs {
					id = layout.IDsFile(b)
				}
				ids = append(ids, cache.FileID(id))
			}
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		return ids
	}
	settle := func(n int) []cache.FileID {
		require.Eventually(t, func() bool { return len(src.read()) >= n }, 5*time.Second, time.Millisecond)
		time.Sleep(20 * time.Millisecond) // nothing more may arrive
		return src.read()
	}

	// Windows are 2 blocks of 4096 bytes. Reading 100 bytes at 0 with 8192 bytes of readahead
	// covers windows 0 and 1 (window 1 starts at 8192 < 0+8192+100).
	f, err := e.Open(bg, Data, e.All())
	require.NoError(t, err)
	r := NewReader(f, 8192)
	_, err = r.ReadAt(make([]byte, 100), 0)
	require.NoError(t, err)
	assert.Equal(t, want(layout.RoleData, 0, 1), settle(4))

	// Moving into window 1 extends the prefetch to window 2 only.
	_, err = r.ReadAt(make([]byte, 100), 8192+10)
	require.NoError(t, err)
	assert.Equal(t, want(layout.RoleData, 0, 1, 2), settle(6))

	// ids readahead counts 8 bytes per record: 32 records are one window here.
	src.files = map[cache.FileID]bool{}
	ids, err := e.Open(bg, IDs, e.All())
	require.NoError(t, err)
	ri := NewReader(ids, 8*32)
	_, err = ri.ReadAt(make([]byte, 8), 8*40) // record 40 is in window 1
	require.NoError(t, err)
	assert.Equal(t, want(layout.RoleIDs, 1, 2), settle(4))
}

// TestReadaheadOutOfOrder: a read a little behind the last one (the kernel's readahead runs
// beside a reader's own reads) requests nothing again; a jump back past the readahead requests
// from there again.
func TestReadaheadOutOfOrder(t *testing.T) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 400, 256, 4096, true) // 16 per block, 25 blocks
	ds, err := local.Open(d.Dir)
	require.NoError(t, err)
	set := newSet(t, ds, nil, cache.Options{Size: 64 * 4096, PageSize: 4096, MaxRead: 4096}, shuffle.Options{Seed: 3, Mode: shuffle.Full, Mix: 1})
	e, err := set.Epoch(1)
	require.NoError(t, err)
	a := e.readahead(layout.RoleData, 0)
	var asked []int
	passed := map[int]func() bool{}
	a.fetch = func(b int, p func() bool) bool { asked, passed[b] = append(asked, b), p; return true }
	blocks := func(from, to int) []int { // the blocks of windows from..to
		var out []int
		for w := from; w <= to; w++ {
			for _, b := range e.Order().Window(w).Blocks {
				out = append(out, int(b))
			}
		}
		return out
	}
	const block = 4096
	a.advance(10*block, 4*block)
	require.Equal(t, blocks(10, 13), asked, "windows 10 to 13: those that start before 10+4 blocks")
	asked = nil
	a.advance(9*block, 4*block)
	a.advance(7*block, 4*block)
	require.Empty(t, asked, "reads up to a readahead behind ask for nothing again")
	a.advance(11*block, 4*block)
	require.Equal(t, blocks(14, 14), asked, "moving on asks for the next window")
	// Window 11's request is passed once a read begins a readahead past its end.
	w11 := blocks(11, 11)[0]
	require.False(t, passed[w11](), "window 11 is being read")
	a.advance(16*block-1, 4*block)
	require.False(t, passed[w11](), "within the readahead of window 11's end")
	a.advance(16*block, 4*block)
	require.True(t, passed[w11](), "a read a readahead past window 11's end: its request is late")
	require.False(t, passed[blocks(14, 14)[0]](), "window 14 is not")
	asked = nil
	a.advance(2*block, 4*block)
	require.Equal(t, blocks(2, 5), asked, "a jump back past the readahead asks again")
}
