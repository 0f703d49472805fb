package view

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/local"
)

// validStarts lists the window starts of docs: seg.Start + k*S for every k with
// start + L - 1 <= seg.End.
func validStarts(segs []layout.Segment, L, S int64) []uint64 {
	var out []uint64
	for _, s := range segs {
		for st := s.Start; st+L-1 <= s.End; st += S {
			out = append(out, uint64(st))
		}
	}
	return out
}

// TestWindows: every window of an epoch is exactly rows[s:s+L] of the rows for its id s, the
// ids are exactly the valid starts, each once, for random window lengths, strides (below, at
// and above the length), segment lists and block sizes, over a file in place and over a pack
// stored in order (windows then run across its block files; some with direct I/O), read whole,
// by shard and through small pinned reads on a small cache.
func TestWindows(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	const R = 12 // bytes per row
	served := 0
	defer func() { require.Greater(t, served, 25, "trials that had windows") }()
	for trial := 0; trial < 40; trial++ {
		n := int64(50 + r.Intn(3000))
		if trial%10 == 3 {
			n = 12000
		}
		var rows []byte
		var base *layout.Dataset
		if trial%2 == 1 { // the rows in a pack stored in order: windows run across its block files
			d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), n, R, int64(R*(1+r.Intn(100))), false)
			for i := int64(0); i < n; i++ {
				rows = append(rows, d.Source[i]...)
			}
			var err error
			base, err = local.Open(d.Dir)
			require.NoError(t, err)
		} else {
			rows = make([]byte, n*R)
			r.Read(rows)
			p := filepath.Join(t.TempDir(), "rows.bin")
			require.NoError(t, os.WriteFile(p, rows, 0o644))
			var err error
			base, err = layout.OpenFlat(p, layout.FlatOptions{RecordSize: R})
			require.NoError(t, err)
		}
		L, S := int64(1+r.Intn(40)), int64(1+r.Intn(50))
		var segs []layout.Segment
		seglen := 200
		if trial%10 == 3 { // thousands of short segments
			L, S, seglen = 1+int64(r.Intn(4)), 1+int64(r.Intn(3)), 8
		}
		if r.Intn(4) > 0 || seglen == 8 {
			for at := int64(r.Intn(5)); at < n; {
				end := min(n-1, at+int64(r.Intn(seglen)))
				segs = append(segs, layout.Segment{Start: at, End: end})
				at = end + 1 + int64(r.Intn(3))
			}
		}
		if seglen == 8 {
			require.Greater(t, len(segs), 1000, "thousands of segments")
		}
		want := validStarts(segs, L, S)
		if segs == nil {
			want = validStarts([]layout.Segment{{Start: 0, End: n - 1}}, L, S)
		}
		bs := int64(R) * (L + int64(r.Intn(300)))
		ds, err := layout.Windows(base, layout.WindowOptions{Length: L, Stride: S, Segments: segs}, bs)
		if len(want) == 0 {
			require.ErrorContains(t, err, "no segment holds a window")
			continue
		}
		require.NoError(t, err)
		served++
		require.EqualValues(t, len(want), ds.Records(), "trial %d: L %d S %d", trial, L, S)
		opt := shuffle.Options{Seed: uint64(trial), Mode: shuffle.Mode(r.Intn(3))}
		set := newSet(t, ds, local.New(ds, trial%4 == 1), cache.Options{Size: 8 * 4096, PageSize: 4096, MaxRead: 8192}, opt)
		e, err := set.Epoch(uint64(r.Intn(5)))
		require.NoError(t, err)
		win := int(L * R)
		for _, rg := range []Range{e.All(), e.Shard(1, 3)} {
			fd, err := e.Open(bg, Data, rg)
			require.NoError(t, err)
			fi, err := e.Open(bg, IDs, rg)
			require.NoError(t, err)
			data, ids := make([]byte, fd.Size()), make([]byte, fi.Size())
			rd := NewReader(fd, 8192)
			for off := 0; off < len(data); { // small reads through Gather, as FUSE does
				g := NewGather()
				k, err := rd.Gather(bg, nil, g, data[off:min(len(data), off+1+r.Intn(3*win))], int64(off))
				require.NoError(t, err)
				if !g.InBuf(data[off:]) {
					g.CopyTo(data[off:])
				}
				g.Release()
				off += k
			}
			_, err = fi.ReadAt(ids, 0)
			require.NoError(t, err)
			var got []uint64
			for k := 0; k < int(rg.Len()); k++ {
				s := binary.LittleEndian.Uint64(ids[8*k:])
				require.True(t, bytes.Equal(rows[int(s)*R:int(s)*R+win], data[k*win:(k+1)*win]), "trial %d: window %d (start %d)", trial, k, s)
				got = append(got, s)
			}
			if rg == e.All() {
				sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
				require.Equal(t, want, got, "trial %d: the starts are exactly the valid ones", trial)
			}
		}
	}
}

// TestWindowRefusals: each bad window option is one error naming what to change.
func TestWindowRefusals(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rows.bin")
	require.NoError(t, os.WriteFile(p, make([]byte, 100*8), 0o644))
	flat, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: 8})
	require.NoError(t, err)
	for _, c := range []struct {
		opt  layout.WindowOptions
		want string
	}{
		{layout.WindowOptions{Length: 0}, "a window needs at least 1 row"},
		{layout.WindowOptions{Length: 101}, "no segment holds a window of 101 rows (the longest has 100)"},
		{layout.WindowOptions{Length: 5, Segments: []layout.Segment{{Start: 10, End: 20}, {Start: 15, End: 30}}}, "segments must not overlap"},
		{layout.WindowOptions{Length: 5, Segments: []layout.Segment{{Start: 50, End: 60}, {Start: 10, End: 20}}}, "segments must be sorted"},
		{layout.WindowOptions{Length: 5, Segments: []layout.Segment{{Start: 90, End: 100}}}, "passes the end of the file (100 rows)"},
		{layout.WindowOptions{Length: 5, Stride: -1}, "--stride -1: must be at least 1"},
		{layout.WindowOptions{Length: 600}, "a window of 600 rows (4800 bytes) is larger than --block-size 4096; raise --block-size"},
	} {
		_, err := layout.Windows(flat, c.opt, 4096)
		require.ErrorContains(t, err, c.want, "%+v", c.opt)
	}
}

// TestWindowsGolden pins the window order for fixed inputs (docs/SHUFFLE.md over windows per
// block), so that a change to it is a conscious one: the same data, seed, epoch and options give
// the same windows across releases.
func TestWindowsGolden(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rows.bin")
	require.NoError(t, os.WriteFile(p, make([]byte, 1000*8), 0o644))
	flat, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: 8})
	require.NoError(t, err)
	ds, err := layout.Windows(flat, layout.WindowOptions{Length: 10, Stride: 3,
		Segments: []layout.Segment{{Start: 0, End: 399}, {Start: 400, End: 405}, {Start: 406, End: 999}}}, 512)
	require.NoError(t, err)
	set := newSet(t, ds, nil, cache.Options{Size: 4 * 4096, PageSize: 4096}, shuffle.Options{Seed: 1, Mode: shuffle.Full, Mix: 2})
	e, err := set.Epoch(3)
	require.NoError(t, err)
	f, err := e.Open(bg, IDs, e.All())
	require.NoError(t, err)
	raw := make([]byte, 8*12)
	_, err = f.ReadAt(raw, 0)
	require.NoError(t, err)
	var got []uint64
	for i := 0; i < 12; i++ {
		got = append(got, binary.LittleEndian.Uint64(raw[8*i:]))
	}
	t.Logf("%d windows in %d blocks; first ids %v", ds.Records(), ds.Blocks(), got)
	require.Equal(t, []uint64{721, 724, 360, 345, 700, 357, 742, 691, 378, 736, 703, 387}, got)
	require.EqualValues(t, 326, ds.Records(), "131 windows in the first segment, none in the second, 195 in the third")
	require.Equal(t, 18, ds.Blocks(), "19 windows of 10 rows with stride 3 fit a 512-byte block of 8-byte rows")
}

// TestWindowsOfShortSegments: 20,000 entities of 2 to 6 rows with gaps between some (a time
// series of many short entities) share blocks: a few dozen blocks, not 20,000, whose windows
// are not evenly spaced (Regular false). Every window read, in one large read and in small
// ones, is the rows it starts at, and the ids are exactly the valid starts.
func TestWindowsOfShortSegments(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	const R, L, S = 8, 2, 1
	var segs []layout.Segment
	at := int64(0)
	for len(segs) < 20000 {
		end := at + 1 + int64(r.Intn(5))
		segs = append(segs, layout.Segment{Start: at, End: end})
		at = end + 1 + int64(r.Intn(2)) // some rows in no segment
	}
	rows := make([]byte, at*R)
	r.Read(rows)
	p := filepath.Join(t.TempDir(), "rows.bin")
	require.NoError(t, os.WriteFile(p, rows, 0o644))
	flat, err := layout.OpenFlat(p, layout.FlatOptions{RecordSize: R})
	require.NoError(t, err)
	ds, err := layout.Windows(flat, layout.WindowOptions{Length: L, Stride: S, Segments: segs}, 16<<10)
	require.NoError(t, err)
	want := validStarts(segs, L, S)
	require.EqualValues(t, len(want), ds.Records())
	require.False(t, ds.Regular(), "short segments share blocks")
	require.Less(t, ds.Blocks(), 60, "%d entities in %d blocks", len(segs), ds.Blocks())
	for b := 0; b < ds.Blocks(); b++ {
		require.LessOrEqual(t, ds.BlockBytes(b), uint64(16<<10), "block %d", b)
	}
	set := newSet(t, ds, nil, cache.Options{Size: 16 * 4096, PageSize: 4096, MaxRead: 8192}, shuffle.Options{Seed: 9, Mix: 8})
	e, err := set.Epoch(1)
	require.NoError(t, err)
	fd, err := e.Open(bg, Data, e.All())
	require.NoError(t, err)
	fi, err := e.Open(bg, IDs, e.All())
	require.NoError(t, err)
	whole, ids := make([]byte, fd.Size()), make([]byte, fi.Size())
	_, err = fd.ReadAt(whole, 0)
	require.NoError(t, err)
	_, err = fi.ReadAt(ids, 0)
	require.NoError(t, err)
	small := make([]byte, fd.Size())
	for off := 0; off < len(small); {
		k, err := fd.ReadAt(small[off:min(len(small), off+1+r.Intn(200))], int64(off))
		require.NoError(t, err)
		off += k
	}
	require.Equal(t, whole, small, "small reads and one large read agree")
	var got []uint64
	for k := 0; k < len(want); k++ {
		s := binary.LittleEndian.Uint64(ids[8*k:])
		require.Equal(t, rows[s*R:(s+L)*R], whole[k*L*R:(k+1)*L*R], "window %d (start %d)", k, s)
		got = append(got, s)
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	require.Equal(t, want, got)
}
