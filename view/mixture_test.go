package view

import (
	"encoding/binary"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

// mixFixture is a mixture of test datasets under one cache, with its naive expectation.
type mixFixture struct {
	m    *Mixture
	dss  []*dstest.Dataset
	opts []shuffle.Options
}

func newMixFixture(t *testing.T, dss []*dstest.Dataset, rules []shuffle.Rule, epochRecords uint64, cacheBytes int64) *mixFixture {
	t.Helper()
	f, err := openMixFixture(t, dss, rules, epochRecords, cacheBytes)
	require.NoError(t, err)
	return f
}

// newMixtureErr is newMixFixture for a mixture NewMixture may refuse.
func newMixtureErr(t *testing.T, dss []*dstest.Dataset, rules []shuffle.Rule) (*mixFixture, error) {
	return openMixFixture(t, dss, rules, 0, 8<<20)
}

func openMixFixture(t *testing.T, dss []*dstest.Dataset, rules []shuffle.Rule, epochRecords uint64, cacheBytes int64) (*mixFixture, error) {
	var parts []source.Blocks
	var opened []*layout.Dataset
	var srcs []shuffle.MixSource
	for i, d := range dss {
		ds, err := local.Open(d.Dir)
		require.NoError(t, err)
		opened = append(opened, ds)
		parts = append(parts, local.New(ds, false))
		srcs = append(srcs, shuffle.MixSource{N: ds.Records(), Rule: rules[i]})
	}
	c, err := cache.New(source.NewMux(parts), cache.Options{Size: cacheBytes, PageSize: pageSizeForTest, MaxRead: max(16384, pageSizeForTest)})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	order, err := shuffle.NewMixture(srcs, epochRecords)
	require.NoError(t, err)
	f := &mixFixture{dss: dss}
	var sets []*Set
	for i, ds := range opened {
		opt := shuffle.Options{Seed: shuffle.SourceSeed(7, i), Mix: 1 + i}
		s, err := NewSet(ds, c.Namespace(i), SetOptions{Order: opt})
		require.NoError(t, err)
		sets = append(sets, s)
		f.opts = append(f.opts, opt)
	}
	f.m, err = NewMixture(sets, order, c, "mix.json", nil)
	return f, err
}

// expect builds epoch e naively: each source's draws by sorting keys, each draw's record
// from the source's naive order of its pass.
func (f *mixFixture) expect(e uint64) (data, ids, srcs, offsets []byte) {
	me, _ := f.m.Order.Epoch(e)
	c := me.Counts()
	type d struct {
		i int
		j uint64
	}
	var all []d
	for i, n := range c {
		for j := range n {
			all = append(all, d{i, j})
		}
	}
	// insertion by key, ties by source: the definition
	less := func(a, b d) bool {
		l, r := (2*a.j+1)*c[b.i], (2*b.j+1)*c[a.i]
		return l < r || l == r && a.i < b.i
	}
	for x := 1; x < len(all); x++ {
		for y := x; y > 0 && less(all[y], all[y-1]); y-- {
			all[y], all[y-1] = all[y-1], all[y]
		}
	}
	orders := map[[2]uint64][]uint64{}
	offsets = binary.LittleEndian.AppendUint64(nil, 0)
	for _, x := range all {
		ds := f.dss[x.i]
		n := uint64(len(ds.Stored))
		k := me.DrawOf(x.i, 0).Pass*n + me.DrawOf(x.i, 0).Pos + x.j
		pass, pos := k/n, k%n
		key := [2]uint64{uint64(x.i), pass}
		if orders[key] == nil {
			opt := f.opts[x.i]
			opt.Epoch = pass
			orders[key] = ds.Order(opt)
		}
		id := ds.Stored[orders[key][pos]]
		data = append(data, ds.Source[id]...)
		ids = binary.LittleEndian.AppendUint64(ids, id)
		srcs = binary.LittleEndian.AppendUint16(srcs, uint16(x.i))
		offsets = binary.LittleEndian.AppendUint64(offsets, uint64(len(data)))
	}
	return
}

func TestMixtureFixed(t *testing.T) {
	dir := t.TempDir()
	a := dstest.Fixed(t, filepath.Join(dir, "a"), 500, 64, 4096, true)
	b := dstest.Fixed(t, filepath.Join(dir, "b"), 130, 64, 2048, false)
	f := newMixFixture(t, []*dstest.Dataset{a, b}, []shuffle.Rule{mustRule(t, shuffle.Weight, "0.7"), mustRule(t, shuffle.Weight, "0.3")}, 400, 1<<20)
	require.Equal(t, []Kind{Data, IDs, Sources}, f.m.Kinds())
	r := rand.New(rand.NewSource(1))
	for e := uint64(0); e < 3; e++ {
		data, ids, srcs, _ := f.expect(e)
		checkMix(t, f.m, e, data, ids, srcs, nil, r)
	}
}

func TestMixtureVariable(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewSource(2))
	lengths := make([]int, 300)
	for i := range lengths {
		lengths[i] = 1 + r.Intn(200)
	}
	a := dstest.Variable(t, filepath.Join(dir, "a"), lengths, 4096, true)
	b := dstest.Fixed(t, filepath.Join(dir, "b"), 40, 100, 1000, false)
	for _, held := range []bool{true, false} { // b is small and drawn 2.5 times: held, or read through its Set
		withTiny(t, held)
		f := newMixFixture(t, []*dstest.Dataset{a, b}, []shuffle.Rule{mustRule(t, shuffle.Repeat, "1/3"), mustRule(t, shuffle.Repeat, "2.5")}, 0, 1<<20)
		require.Equal(t, []Kind{Data, IDs, Offsets, Sources}, f.m.Kinds())
		require.Equal(t, held, f.m.tiny[1] != nil)
		for e := uint64(0); e < 4; e++ {
			data, ids, srcs, offs := f.expect(e)
			checkMix(t, f.m, e, data, ids, srcs, offs, r)
		}
	}
}

// withTiny lets a test's mixtures hold their small sources (tinyTotal), or not.
func withTiny(t *testing.T, held bool) {
	old := tinyTotal
	t.Cleanup(func() { tinyTotal = old })
	tinyTotal = 0
	if held {
		tinyTotal = old
	}
}

func mustRule(t *testing.T, k shuffle.RuleKind, s string) shuffle.Rule {
	r, err := shuffle.ParseRule(k, s)
	require.NoError(t, err)
	return r
}

// checkMix compares every file of epoch e, whole and in shards, with the expectation.
func checkMix(t *testing.T, m *Mixture, e uint64, data, ids, srcs, offs []byte, r *rand.Rand) {
	t.Helper()
	n, err := m.Records(e)
	require.NoError(t, err)
	require.EqualValues(t, len(ids)/8, n)
	for _, w := range []uint64{1, 3} {
		for sh := uint64(0); sh < w; sh++ {
			rg := ShardRange(n, sh, w)
			want := map[Kind][]byte{IDs: ids[8*rg.Start : 8*rg.End], Sources: srcs[2*rg.Start : 2*rg.End]}
			lo, hi := rg.Start*uint64(m.RecordSize()), rg.End*uint64(m.RecordSize())
			if offs != nil {
				lo, hi = binary.LittleEndian.Uint64(offs[8*rg.Start:]), binary.LittleEndian.Uint64(offs[8*rg.End:])
				var rel []byte
				for p := rg.Start; p <= rg.End; p++ {
					rel = binary.LittleEndian.AppendUint64(rel, binary.LittleEndian.Uint64(offs[8*p:])-lo)
				}
				want[Offsets] = rel
			}
			want[Data] = data[lo:hi]
			for k, b := range want {
				f, err := m.Open(bg, e, k, rg)
				require.NoError(t, err)
				size, err := m.FileSize(bg, e, k, rg)
				require.NoError(t, err)
				require.Equal(t, size, f.Size())
				checkFile(t, NewReader(f, 1<<16), f.Size(), b, r)
			}
		}
	}
}

// BenchmarkMixtureGather serves 1 MiB reads of a cached epoch as fs does (Gather), from one
// dataset of 4 KiB records and from a mixture 0.7/0.3 of two of the same total size.
func BenchmarkMixtureGather(b *testing.B) {
	const rs, n = 4096, 4096
	dir := b.TempDir()
	one := dstest.Fixed(b, filepath.Join(dir, "one"), n, rs, 1<<20, true)
	a := dstest.Fixed(b, filepath.Join(dir, "a"), n*7/10, rs, 1<<20, true)
	c := dstest.Fixed(b, filepath.Join(dir, "c"), n-n*7/10, rs, 1<<20, true)
	open := func(dss []*dstest.Dataset, rules []shuffle.Rule, total uint64) Content {
		var parts []source.Blocks
		var opened []*layout.Dataset
		var srcs []shuffle.MixSource
		for i, d := range dss {
			ds, err := local.Open(d.Dir)
			if err != nil {
				b.Fatal(err)
			}
			opened = append(opened, ds)
			parts = append(parts, local.New(ds, false))
			if rules != nil {
				srcs = append(srcs, shuffle.MixSource{N: ds.Records(), Rule: rules[i]})
			}
		}
		cc, err := cache.New(source.NewMux(parts), cache.Options{Size: 256 << 20, MaxRead: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cc.Close() })
		var sets []*Set
		for i, ds := range opened {
			s, err := NewSet(ds, cc.Namespace(i), SetOptions{Order: shuffle.Options{Seed: 3}})
			if err != nil {
				b.Fatal(err)
			}
			sets = append(sets, s)
		}
		if rules == nil {
			return sets[0]
		}
		order, err := shuffle.NewMixture(srcs, total)
		if err != nil {
			b.Fatal(err)
		}
		m, err := NewMixture(sets, order, cc, "m", nil)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	w7, _ := shuffle.ParseRule(shuffle.Weight, "0.7")
	w3, _ := shuffle.ParseRule(shuffle.Weight, "0.3")
	for _, cs := range []struct {
		name string
		s    Content
	}{{"one", open([]*dstest.Dataset{one}, nil, 0)}, {"mixture", open([]*dstest.Dataset{a, c}, []shuffle.Rule{w7, w3}, n)}} {
		b.Run(cs.name, func(b *testing.B) {
			n, _ := cs.s.Records(1)
			f, err := cs.s.Open(bg, 1, Data, Range{0, n})
			if err != nil {
				b.Fatal(err)
			}
			r := NewReader(f, 0)
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			off := int64(0)
			for range b.N {
				if off+int64(len(buf)) > f.Size() {
					off = 0
				}
				g := NewGather()
				if _, err := r.Gather(bg, nil, g, buf, off); err != nil {
					b.Fatal(err)
				}
				g.Release()
				off += int64(len(buf))
			}
		})
	}
}

var pageSizeForTest = 4096
