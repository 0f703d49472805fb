package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/source"
)

func TestParts(t *testing.T) {
	buf := make([]byte, 10)
	for _, c := range []struct {
		lo, hi, size, at int64
		want             []part // bufs compared by length
	}{
		// The read [12, 22) of an object of 30 bytes, whole, in parts of 8.
		{0, 30, 8, 12, []part{{0, 8, 8, 0, nil}, {8, 8, 4, 0, [][]byte{buf[:4]}}, {16, 8, 0, 2, [][]byte{buf[4:10]}}, {24, 6, 0, 6, nil}}},
		// The read alone.
		{12, 22, 8, 12, []part{{12, 8, 0, 0, [][]byte{buf[:8]}}, {20, 2, 0, 0, [][]byte{buf[8:]}}}},
	} {
		got := parts(c.lo, c.hi, c.size, c.at, [][]byte{buf})
		require.Len(t, got, len(c.want))
		for i, p := range got {
			w := c.want[i]
			assert.Equal(t, []int64{w.off, w.n, w.head, w.tail}, []int64{p.off, p.n, p.head, p.tail}, "part %d", i)
			assert.Equal(t, source.Len(w.bufs), source.Len(p.bufs), "part %d", i)
			assert.Equal(t, p.n, p.head+int64(source.Len(p.bufs))+p.tail, "part %d", i)
		}
	}
}

// TestReadSumSkips: the bytes of a part no read wants are summed, not kept.
func TestReadSumSkips(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 50000) // larger than the scratch buffer
	head, tail := int64(300001), int64(200003)
	mid := make([]byte, int64(len(data))-head-tail)
	crc, err := readSum(bytes.NewReader(data), part{n: int64(len(data)), head: head, tail: tail, bufs: [][]byte{mid}}, true)
	require.NoError(t, err)
	assert.Equal(t, crc32c.Checksum(data), crc)
	assert.Equal(t, data[head:int64(len(data))-tail], mid)
	_, err = readSum(bytes.NewReader(data[:len(data)-1]), part{n: int64(len(data)), head: head, tail: tail, bufs: [][]byte{mid}}, true)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// hangingStore is a Store whose client never answers (a store stopped with SIGSTOP: every
// request waits until its try's context ends), with 8 objects of size bytes; it also returns
// how many requests the store has had.
func hangingStore(t *testing.T, opt Options, size int64) (*Blocks, func() int) {
	cl := &hangClient{}
	st, err := New(cl, "p", opt)
	require.NoError(t, err)
	var tab table
	for i := range 8 {
		tab = append(tab, source.Extent{Name: fmt.Sprintf("p/obj%d", i), Size: size,
			Ident: source.Identity{Size: size, Tag: "e", CRC32C: 1, HasCRC: true}})
	}
	return NewBlocks(st, tab), cl.requests
}

// hangClient is a Client whose store never answers.
type hangClient struct {
	mu sync.Mutex
	n  int
}

func (c *hangClient) hang(ctx context.Context) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	<-ctx.Done()
	return fmt.Errorf("reading the answer: %w", ctx.Err())
}

func (c *hangClient) requests() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

func (c *hangClient) Get(ctx context.Context, _ string, _, _ int64, _ string) (io.ReadCloser, int64, error) {
	return nil, 0, c.hang(ctx)
}
func (c *hangClient) Stat(ctx context.Context, _ string) (Object, error) {
	return Object{}, c.hang(ctx)
}
func (c *hangClient) List(ctx context.Context, _ string, _ func(Object) error) error {
	return c.hang(ctx)
}
func (c *hangClient) Put(ctx context.Context, _ string, _ io.ReadSeeker, _ int64) error {
	return c.hang(ctx)
}
func (c *hangClient) Create(ctx context.Context, _ string, _ io.ReadSeeker, _ int64) error {
	return c.hang(ctx)
}
func (c *hangClient) Remove(ctx context.Context, _ string) error { return c.hang(ctx) }
func (c *hangClient) Answer(error) Answer                        { return Answer{} }
func (c *hangClient) URL(key string) string                      { return "test://" + key }
func (c *hangClient) Endpoint() string                           { return "test://" }

// table is a source.Table of one file per extent.
type table []source.Extent

func (tb table) Extent(id source.FileID) (source.Extent, bool) {
	if int(id) >= len(tb) {
		return source.Extent{}, false
	}
	return tb[id], true
}

// TestStoreSilent: against a store that never answers, a read fails with ErrUnavailable after
// its tries stall out, not their time limit; once the store has been silent for the budget, a
// reader's read fails after one try and readahead's at once, and reads queued behind the pool
// do not wait a budget each.
func TestStoreSilent(t *testing.T) {
	const stall = 150 * time.Millisecond
	b, conns := hangingStore(t, Options{Concurrency: 1, Timeout: time.Minute, StallTimeout: stall, Retries: 3, Backoff: time.Millisecond}, 1<<20)
	budget := b.s.silenceBudget()
	require.Equal(t, 4*stall, budget)
	buf := make([]byte, 100)
	start := time.Now()
	err := b.Fill(context.Background(), 0, 0, [][]byte{buf}, source.Read{})
	took := time.Since(start)
	require.ErrorIs(t, err, source.ErrUnavailable)
	assert.Contains(t, err.Error(), "no progress for")
	t.Log(err)
	assert.GreaterOrEqual(t, took, budget)
	assert.Less(t, took, budget+2*stall, "a read against a silent store")
	assert.Equal(t, 4, conns(), "one request per try")
	assert.NotErrorIs(t, err, source.ErrNotTried, "a read that tried")

	// Silent for the budget already: a reader's read makes one try (to find the store if it is
	// back), a readahead's none.
	start = time.Now()
	err = b.Fill(context.Background(), 1, 0, [][]byte{buf}, source.Read{})
	require.ErrorIs(t, err, source.ErrUnavailable)
	t.Log(err)
	took = time.Since(start)
	assert.GreaterOrEqual(t, took, stall)
	assert.Less(t, took, 3*stall, "a read once the store is known silent")
	assert.Equal(t, 5, conns())
	start = time.Now()
	err = b.Fill(context.Background(), 2, 0, [][]byte{buf}, source.Read{Ahead: new(source.Ahead)})
	require.ErrorIs(t, err, source.ErrUnavailable)
	assert.ErrorIs(t, err, source.ErrNotTried, "readahead's is no answer: a reader that joins it tries itself")
	t.Log(err)
	assert.Less(t, time.Since(start), stall/2, "readahead once the store is known silent")
	assert.Equal(t, 5, conns())

	// Reads queued for one slot: readahead's give up at once, the readers' each after one try,
	// not one budget after the other.
	var wg sync.WaitGroup
	start = time.Now()
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var how source.Read
			if i >= 2 {
				how.Ahead = new(source.Ahead)
			}
			assert.ErrorIs(t, b.Fill(context.Background(), source.FileID(i), 0, [][]byte{make([]byte, 100)}, how), source.ErrUnavailable)
		}()
	}
	wg.Wait()
	took = time.Since(start)
	assert.Less(t, took, 3*stall+stall/2, "queued reads against a silent store")
	assert.Equal(t, 7, conns())
	t.Logf("queued reads failed in %v", took)
}

// TestStagedFetchPromoted: a reader's read of an object whose whole fetch readahead began
// (staged for reads of parts) promotes that fetch, as the cache promotes a load a reader
// joins: from then on it is served as a reader's.
func TestStagedFetchPromoted(t *testing.T) {
	const stall = 200 * time.Millisecond
	b, _ := hangingStore(t, Options{Concurrency: 1, Timeout: time.Minute, StallTimeout: stall, Retries: 0, Backoff: time.Millisecond}, 1<<20)
	ahead := new(source.Ahead)
	errs := make(chan error, 2)
	go func() {
		errs <- b.Fill(context.Background(), 0, 0, [][]byte{make([]byte, 100)}, source.Read{Ahead: ahead})
	}()
	require.Eventually(t, func() bool {
		b.stage.mu.Lock()
		defer b.stage.mu.Unlock()
		return len(b.stage.objs) == 1
	}, time.Second, time.Millisecond, "readahead's fetch is staged")
	assert.True(t, source.Read{Ahead: ahead}.Background())
	go func() { errs <- b.Fill(context.Background(), 0, 4096, [][]byte{make([]byte, 100)}, source.Read{}) }()
	require.Eventually(t, func() bool { return !source.Read{Ahead: ahead}.Background() }, time.Second, time.Millisecond,
		"the reader joining the staged fetch promotes it")
	for range 2 {
		assert.ErrorIs(t, <-errs, source.ErrUnavailable)
	}
}
