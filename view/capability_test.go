package view

import (
	"context"
	"path/filepath"
	"sort"
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

// TestOwnBlocksFieldReadsAhead: a field cut at blocks of its own (a labels field, read by its
// samples' storage indices) reads ahead like any epoch file: a reader at the start of an epoch
// gets the field's blocks holding the values of the anchor's first windows prefetched, in the
// anchor's order. (NewReader chose readahead by the file's type and left these files out.)
func TestOwnBlocksFieldReadsAhead(t *testing.T) {
	dir := t.TempDir()
	anchor := dstest.Fixed(t, filepath.Join(dir, "x"), 400, 256, 4096, false) // 16 a block, 25 blocks
	labels := dstest.Fixed(t, filepath.Join(dir, "y"), 400, 8, 512, false)    // 64 a block, 7 blocks
	var dss []*layout.Dataset
	var parts []source.Blocks
	for _, d := range []*dstest.Dataset{anchor, labels} {
		ds, err := local.Open(d.Dir)
		require.NoError(t, err)
		dss, parts = append(dss, ds), append(parts, local.New(ds, false))
	}
	src := &recordingSource{Blocks: source.NewMux(parts), files: map[cache.FileID]bool{}}
	c, err := cache.New(src, cache.Options{Size: 64 * 4096, PageSize: 4096, MaxRead: 4096})
	require.NoError(t, err)
	defer c.Close()
	opt := shuffle.Options{Seed: 3, Mode: shuffle.Full, Mix: 2} // windows of 2 blocks: 32 samples
	var sets []*Set
	for i, ds := range dss {
		s, err := NewSet(ds, c.Namespace(i), SetOptions{Order: opt})
		require.NoError(t, err)
		sets = append(sets, s)
	}
	f, err := NewFields(sets, []string{"x", "y"}, []bool{false, true}, c, dir, nil)
	require.NoError(t, err)
	file, err := f.Open(bg, 1, FieldKind(1, false), Range{0, 400})
	require.NoError(t, err)
	require.Implements(t, (*readsAhead)(nil), file)

	// The labels of windows 0 and 1 of the anchor's order: the labels blocks holding the
	// values of their blocks' samples, in the labels' namespace.
	e, err := sets[0].Epoch(1)
	require.NoError(t, err)
	wantSet := map[cache.FileID]bool{}
	for w := range 2 {
		for _, b := range e.Order().Window(w).Blocks {
			first := dss[0].FirstRecord(b)
			for r := first; r < first+dss[0].BlockRecords(b); r++ {
				lb, _ := dss[1].BlockOf(r)
				wantSet[cache.FileID(layout.DataFile(lb))|1<<cache.NamespaceShift] = true
			}
		}
	}
	var want []cache.FileID
	for id := range wantSet {
		want = append(want, id)
	}
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	require.Less(t, len(want), dss[1].Blocks(), "the test needs windows that do not cover every labels block")

	// 8 bytes of labels at 0 with 256 bytes of readahead (32 labels): windows 0 and 1.
	r := NewReader(file, 8*32)
	_, err = r.ReadAt(make([]byte, 8), 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(src.read()) >= len(want) }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // nothing more may arrive
	assert.Equal(t, want, src.read())

	// The values read are the labels of the anchor's samples, read ahead or not.
	got := make([]byte, 8*400)
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	for p := range uint64(400) {
		win := e.Order().Window(e.Order().WindowOf(p))
		b, local := win.At(p - win.Start)
		assert.Equal(t, labels.Source[anchor.Stored[dss[0].FirstRecord(b)+local]], got[8*p:8*p+8], "position %d", p)
	}
}

// gatedSource holds every read until release is closed.
type gatedSource struct {
	source.Blocks
	release chan struct{}
}

func (s *gatedSource) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	<-s.release
	return s.Blocks.Fill(ctx, id, off, bufs, how)
}

// TestMixtureReadaheadOffsetsAreTheReads: the offsets a mixture's readahead reads to place a
// variable-length source's segment are read as part of the read that asked: an interrupted
// read stops waiting for them, and the time it waited is counted in its Waits. (They were read
// with context.Background(): a reader killed while the store hung stayed in the daemon, and
// the wait was missing from read_wait_seconds.)
func TestMixtureReadaheadOffsetsAreTheReads(t *testing.T) {
	defer func(v int64) { tinyTotal = v }(tinyTotal)
	tinyTotal = 0 // every source read through its Set
	dir := t.TempDir()
	var parts []source.Blocks
	var srcs []shuffle.MixSource
	var dss []*layout.Dataset
	for i := range 2 {
		lengths := make([]int, 300)
		for k := range lengths {
			lengths[k] = 1 + (k*7+i)%50
		}
		d := dstest.Variable(t, filepath.Join(dir, string(rune('a'+i))), lengths, 1024, false)
		ds, err := local.Open(d.Dir)
		require.NoError(t, err)
		dss, parts = append(dss, ds), append(parts, local.New(ds, false))
		srcs = append(srcs, shuffle.MixSource{N: ds.Records(), Rule: mustRule(t, shuffle.Repeat, "1")})
	}
	src := &gatedSource{Blocks: source.NewMux(parts), release: make(chan struct{})}
	c, err := cache.New(src, cache.Options{Size: 1 << 20, PageSize: 4096, MaxRead: 16384})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	t.Cleanup(func() { close(src.release) }) // before Close, which waits for the loads
	order, err := shuffle.NewMixture(srcs, 0)
	require.NoError(t, err)
	var sets []*Set
	for i, ds := range dss {
		s, err := NewSet(ds, c.Namespace(i), SetOptions{Order: shuffle.Options{Seed: shuffle.SourceSeed(7, i), Mix: 1 + i}})
		require.NoError(t, err)
		sets = append(sets, s)
	}
	m, err := NewMixture(sets, order, c, "mix.json", nil)
	require.NoError(t, err)
	me, err := m.epoch(0)
	require.NoError(t, err)
	// A handle on the epoch's data with readahead, made without reading (Open would read the
	// offsets to size it, and the source holds every read).
	f := &mixData{me: &mixEpoch{m: m, e: me}, ra: make([]*readahead, 2), raPass: make([]uint64, 2)}
	NewReader(f, 1<<20)
	require.EqualValues(t, 1<<20, f.ahead)

	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	var w Waits
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.prefetch(call{ctx: ctx, waits: &w}, 0, []segment{{src: 0, pass: 0, Range: Range{Start: 100, End: 101}}})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the readahead of an interrupted read still waits for the source's offsets")
	}
	assert.GreaterOrEqual(t, w.Duration(), 40*time.Millisecond, "the wait for the offsets is the read's")
}
