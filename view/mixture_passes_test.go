package view

import (
	"encoding/binary"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

// A variable-length source drawn many times an epoch: each read's byte arithmetic covers
// whole passes at once (drawBytes), and the records still match the definition.
func TestMixtureVariableManyPasses(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewSource(3))
	big := make([]int, 200)
	for i := range big {
		big[i] = 1 + r.Intn(100)
	}
	a := dstest.Variable(t, filepath.Join(dir, "a"), big, 2048, true)
	b := dstest.Variable(t, filepath.Join(dir, "b"), []int{3, 1, 7, 2, 5, 4, 9}, 16, false)
	for _, held := range []bool{true, false} {
		withTiny(t, held)
		f := newMixFixture(t, []*dstest.Dataset{a, b}, []shuffle.Rule{mustRule(t, shuffle.Repeat, "1"), mustRule(t, shuffle.Repeat, "17.5")}, 0, 1<<20)
		require.Equal(t, held, f.m.tiny[1] != nil)
		for e := uint64(0); e < 2; e++ {
			data, ids, srcs, offs := f.expect(e)
			checkMix(t, f.m, e, data, ids, srcs, offs, r)
		}
	}
}

// A 3-record source drawn 10^7 times an epoch, or 2^47 times: opening, sizing and reading
// anywhere in the epoch work (before drawBytes counted whole passes at once, sizing listed one
// segment a pass: 2^47 / 3 of them), and what a read gives agrees with the epoch's own
// offsets, ids and sources files. test/ TestMixtureHugeRepeat times it through a mount.
func TestMixtureHugeRepeat(t *testing.T) {
	dir := t.TempDir()
	a := dstest.Variable(t, filepath.Join(dir, "a"), []int{100, 50, 200, 80}, 4096, false)
	v := dstest.Variable(t, filepath.Join(dir, "v"), []int{2, 2, 2}, 4096, false)
	for _, rules := range [][]shuffle.Rule{
		{mustRule(t, shuffle.Repeat, "1"), mustRule(t, shuffle.Repeat, "10000000")},
		{mustRule(t, shuffle.Repeat, "1"), mustRule(t, shuffle.Records, "140737488355328")}, // 2^47
	} {
		withTiny(t, true)
		f := newMixFixture(t, []*dstest.Dataset{a, v}, rules, 0, cacheForTest)
		require.NotNil(t, f.m.tiny[1])
		n, err := f.m.Records(0)
		require.NoError(t, err)
		size, err := f.m.FileSize(bg, 0, Data, Range{0, n})
		require.NoError(t, err)
		r := rand.New(rand.NewSource(4))
		for range 2 {
			off := r.Int63n(size - 1<<20)
			checkMixRead(t, f, n, off, 256<<10)
		}
		checkMixRead(t, f, n, size-1000, 1000)
	}
}

// checkMixRead reads [off, off+length) of epoch 0's data and checks each record in it against
// the epoch's offsets, sources and ids files and the sources' records.
func checkMixRead(t *testing.T, f *mixFixture, n uint64, off, length int64) {
	t.Helper()
	all := Range{0, n}
	open := func(k Kind) File {
		file, err := f.m.Open(bg, 0, k, all)
		require.NoError(t, err)
		return file
	}
	data := make([]byte, length)
	_, err := NewReader(open(Data), aheadForTest).ReadAt(data, off)
	require.NoError(t, err)
	me := &mixEpoch{m: f.m, e: mustEpoch(t, f.m)}
	p0, skip, err := me.positionOf(background(), uint64(off))
	require.NoError(t, err)
	p1, _, err := me.positionOf(background(), uint64(off+length-1))
	require.NoError(t, err)
	k := int64(p1 - p0 + 1)
	table := func(kind Kind, width, extra int64) []byte {
		b := make([]byte, width*(k+extra))
		_, err := open(kind).ReadAt(b, width*int64(p0))
		require.NoError(t, err)
		return b
	}
	offs, ids, srcs := table(Offsets, 8, 1), table(IDs, 8, 0), table(Sources, 2, 0)
	var got []byte
	for x := range k {
		rec := f.dss[binary.LittleEndian.Uint16(srcs[2*x:])].Source[binary.LittleEndian.Uint64(ids[8*x:])]
		require.EqualValues(t, uint64(off)-skip+uint64(len(got)), binary.LittleEndian.Uint64(offs[8*x:]), "offset of position %d", p0+uint64(x))
		got = append(got, rec...)
	}
	require.EqualValues(t, uint64(off)-skip+uint64(len(got)), binary.LittleEndian.Uint64(offs[8*k:]))
	require.Equal(t, got[skip:skip+uint64(length)], data, "bytes at %d", off)
}

func mustEpoch(t *testing.T, m *Mixture) *shuffle.MixEpoch {
	e, err := m.epoch(0)
	require.NoError(t, err)
	return e
}

var cacheForTest, aheadForTest int64 = 8 << 20, 1 << 20

// A source so small for its draws that a read would cross more passes than its path allows
// is refused, naming the bound.
func TestMixturePassesRefused(t *testing.T) {
	dir := t.TempDir()
	a := dstest.Variable(t, filepath.Join(dir, "a"), []int{100, 50, 200, 80}, 4096, false)
	one := dstest.Variable(t, filepath.Join(dir, "one"), []int{1}, 4096, false)
	v := dstest.Variable(t, filepath.Join(dir, "v"), []int{2, 2, 2}, 4096, false)
	big := dstest.Variable(t, filepath.Join(dir, "big"), []int{1<<20 + 1}, 4096, false)
	for _, c := range []struct {
		src  *dstest.Dataset
		held bool
		want string
	}{
		{one, true, "could cross 1048578 passes of its order (at most 1048576)"},
		{v, false, "could cross 174764 passes of its order (at most 65536)"},
		// Too large to hold: a 1 MiB read of the epoch's .ids crosses 131072 of its passes.
		{big, true, "could cross 131074 passes of its order (at most 65536)"},
	} {
		withTiny(t, c.held)
		_, err := newMixtureErr(t, []*dstest.Dataset{a, c.src}, []shuffle.Rule{mustRule(t, shuffle.Repeat, "1"), mustRule(t, shuffle.Repeat, "10000000")})
		require.ErrorIs(t, err, shuffle.ErrMixture)
		require.ErrorContains(t, err, c.want)
	}
}
