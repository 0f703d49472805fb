package fs

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/view"
)

// TestShmCopyPieces: a read as large as a client's buffer is asked of its file shmChunk bytes
// at a time, each piece once, on no more goroutines at once than its own and the spare cores'
// (some files make a buffer of what one read asks).
func TestShmCopyPieces(t *testing.T) {
	keep := shmReadFull
	t.Cleanup(func() { shmReadFull = keep })
	var mu sync.Mutex
	seen := map[int64]int{} // offset -> length
	var now, most atomic.Int64
	shmReadFull = func(_ *view.Reader, _ context.Context, _ *view.Waits, p []byte, off int64) error {
		k := now.Add(1)
		defer now.Add(-1)
		time.Sleep(time.Millisecond) // long enough for the goroutines' pieces to overlap
		mu.Lock()
		most.Store(max(most.Load(), k))
		defer mu.Unlock()
		require.LessOrEqual(t, len(p), shmChunk, "a piece of %d bytes at %d", len(p), off)
		require.NotContains(t, seen, off, "the piece at %d asked twice", off)
		seen[off] = len(p)
		return nil
	}
	for _, n := range []int{1, shmChunk, shmChunk + 1, 70<<20 + 12345} {
		clear(seen)
		s := &shmServer{ctx: context.Background(), spare: make(chan struct{}, 3)}
		sc := &shmConn{s: s}
		require.NoError(t, sc.copy(&view.Waits{}, nil, make([]byte, n), 1000))
		var at int64 = 1000
		for at < int64(n)+1000 {
			l, ok := seen[at]
			require.True(t, ok, "%d bytes: no piece at %d", n, at)
			at += int64(l)
		}
		require.Equal(t, int64(n)+1000, at, "%d bytes: the pieces cover the read", n)
		require.LessOrEqual(t, most.Load(), int64(4), "pieces at once: the read's goroutine and 3 spare cores'")
	}
	require.Greater(t, most.Load(), int64(1), "the large reads were copied on several goroutines")
}
