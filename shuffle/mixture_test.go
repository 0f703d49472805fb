package shuffle

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func rule(t *testing.T, k RuleKind, s string) Rule {
	t.Helper()
	r, err := ParseRule(k, s)
	require.NoError(t, err)
	return r
}

// naiveInterleave sorts every draw by its key, the definition in SHUFFLE.md.
func naiveInterleave(c []uint64) []int {
	type d struct {
		i int
		j uint64
	}
	var all []d
	for i, n := range c {
		for j := uint64(0); j < n; j++ {
			all = append(all, d{i, j})
		}
	}
	slices.SortStableFunc(all, func(a, b d) int {
		// (2a.j+1)/(2c_a) vs (2b.j+1)/(2c_b)
		l, r := (2*a.j+1)*c[b.i], (2*b.j+1)*c[a.i]
		switch {
		case l < r:
			return -1
		case l > r:
			return 1
		}
		return a.i - b.i
	})
	out := make([]int, len(all))
	for p, x := range all {
		out[p] = x.i
	}
	return out
}

func TestInterleaveMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][]uint64{{7, 3}, {1, 1}, {5}, {0, 4, 4}, {700, 300}, {1, 999}, {3, 3, 3, 3}}
	for range 200 {
		s := 1 + rng.IntN(6)
		c := make([]uint64, s)
		for i := range c {
			c[i] = uint64(rng.IntN(60))
		}
		cases = append(cases, c)
	}
	for _, c := range cases {
		want := naiveInterleave(c)
		il := NewInterleave(c)
		require.Equal(t, uint64(len(want)), il.Len())
		n := make([]uint64, len(c))
		seen := make([]uint64, len(c))
		for p, src := range want {
			i, j := il.At(uint64(p))
			require.Equal(t, src, i, "counts %v position %d", c, p)
			require.Equal(t, seen[src], j, "counts %v position %d", c, p)
			require.Equal(t, uint64(p), il.Position(i, j))
			il.Before(uint64(p), n)
			require.Equal(t, seen, n, "counts %v position %d", c, p)
			seen[src]++
		}
		il.Before(il.Len(), n)
		require.Equal(t, c, n)
		// Sequential iteration from every start, both ways.
		for p0 := 0; p0 <= len(want); p0 += 1 + len(want)/7 {
			il.Before(uint64(p0), n)
			it := il.Iter(uint64(p0))
			for p := p0; p < len(want); p++ {
				require.Equal(t, want[p], il.Next(n))
				require.Equal(t, want[p], it.Next(), "counts %v from %d at %d", c, p0, p)
			}
			require.Equal(t, -1, il.Next(n))
			require.Equal(t, -1, it.Next())
		}
	}
}

// At and Before cost O(S log S): a mixture of the most sources allowed answers quickly.
func TestInterleaveManySources(t *testing.T) {
	c := make([]uint64, MaxSources)
	for i := range c {
		c[i] = uint64(1000 + 37*i)
	}
	il := NewInterleave(c)
	n := make([]uint64, len(c))
	for _, p := range []uint64{0, 1, il.Len() / 3, il.Len() - 1} {
		il.Before(p, n)
		var sum uint64
		for _, x := range n {
			sum += x
		}
		require.Equal(t, p, sum)
		i, j := il.At(p)
		require.Equal(t, p, il.Position(i, j))
	}
}

// Every window of 1000 consecutive records holds each source's share within one of its floor
// and ceiling, for the mixtures the docs show.
func TestInterleaveShareInEveryWindow(t *testing.T) {
	for _, c := range [][]uint64{{70000, 30000}, {600, 200, 100, 100}, {123457, 65432, 999}, {6250, 6250, 6250, 6250, 6250, 6250, 6250, 6250, 6250, 6250, 6250, 6250, 6250, 6250, 6250, 6250}} {
		il := NewInterleave(c)
		src := make([]int, il.Len())
		n := make([]uint64, len(c))
		for p := range src {
			src[p] = il.Next(n)
		}
		const L = 1000
		cnt := make([]int64, len(c))
		for p := range src {
			cnt[src[p]]++
			if p >= L {
				cnt[src[p-L]]--
			}
			if p >= L-1 {
				for i := range c {
					exact := float64(L) * float64(c[i]) / float64(il.Len())
					require.InDelta(t, exact, float64(cnt[i]), 2, "counts %v source %d window ending %d", c, i, p)
					lo, hi := int64(exact)-1, int64(exact)+2
					require.True(t, cnt[i] >= lo && cnt[i] <= hi, "counts %v source %d window ending %d: %d, share %.1f", c, i, p, cnt[i], exact)
				}
			}
		}
	}
}

func TestMixtureCounts(t *testing.T) {
	// weights 0.7/0.3 of 1000 records: exact, every epoch.
	m, err := NewMixture([]MixSource{{N: 5000, Rule: rule(t, Weight, "0.7")}, {N: 100, Rule: rule(t, Weight, "0.3")}}, 1000)
	require.NoError(t, err)
	require.False(t, m.Varies())
	for e := uint64(0); e < 3; e++ {
		me, err := m.Epoch(e)
		require.NoError(t, err)
		require.Equal(t, []uint64{700, 300}, me.Counts())
		require.Equal(t, Draw{e * 700 / 5000, e * 700 % 5000}, me.DrawOf(0, 0))
		require.Equal(t, Draw{(e*300 + 299) / 100, (e*300 + 299) % 100}, me.DrawOf(1, 299))
	}
	// largest remainder: thirds of 100
	m, err = NewMixture([]MixSource{{N: 10, Rule: rule(t, Weight, "1")}, {N: 10, Rule: rule(t, Weight, "1")}, {N: 10, Rule: rule(t, Weight, "1")}}, 100)
	require.NoError(t, err)
	me, _ := m.Epoch(0)
	require.Equal(t, []uint64{34, 33, 33}, me.Counts())
	// derived epoch size: the weighted sources' records.
	m, err = NewMixture([]MixSource{{N: 10, Rule: rule(t, Weight, "3")}, {N: 30, Rule: rule(t, Weight, "1")}, {N: 7, Rule: rule(t, Records, "5")}}, 0)
	require.NoError(t, err)
	me, _ = m.Epoch(4)
	require.Equal(t, []uint64{30, 10, 5}, me.Counts())
	require.Equal(t, uint64(45), me.Len())
}

// A source at repeat 1/3 gives each of its records exactly once over 3 epochs; at 2.5, two
// and a half passes an epoch, each pass a new epoch of its own order.
func TestMixtureRepeat(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 10, 1000, 1001, 99991} {
		m, err := NewMixture([]MixSource{{N: n, Rule: rule(t, Repeat, "1/3")}, {N: 50, Rule: rule(t, Records, "50")}}, 0)
		require.NoError(t, err)
		seen := map[Draw]int{}
		var total uint64
		for e := uint64(0); e < 6; e++ {
			me, err := m.Epoch(e)
			require.NoError(t, err)
			for j := range me.Count(0) {
				seen[me.DrawOf(0, j)]++
			}
			total += me.Count(0)
			if e == 2 {
				require.Equal(t, n, total, "n %d", n)
				require.Len(t, seen, int(n))
				for d, k := range seen {
					require.Equal(t, uint64(0), d.Pass)
					require.Equal(t, 1, k)
				}
			}
		}
		require.Equal(t, 2*n, total)
		require.Len(t, seen, int(2*n))
	}
	m, err := NewMixture([]MixSource{{N: 10, Rule: rule(t, Repeat, "2.5")}}, 0)
	require.NoError(t, err)
	require.True(t, m.Varies() == false)
	me0, _ := m.Epoch(0)
	me1, _ := m.Epoch(1)
	require.Equal(t, uint64(25), me0.Count(0))
	require.Equal(t, Draw{2, 4}, me0.DrawOf(0, 24))
	require.Equal(t, Draw{2, 5}, me1.DrawOf(0, 0))
	m, _ = NewMixture([]MixSource{{N: 3, Rule: rule(t, Repeat, "0.5")}}, 0)
	require.True(t, m.Varies())
	var got []uint64
	for e := range uint64(4) {
		me, _ := m.Epoch(e)
		got = append(got, me.Count(0))
	}
	require.Equal(t, []uint64{1, 2, 1, 2}, got)
}

func TestMixtureRefusals(t *testing.T) {
	for _, c := range []struct {
		srcs []MixSource
		T    uint64
		msg  string
	}{
		{nil, 0, "no sources"},
		{[]MixSource{{N: 0, Rule: rule(t, Weight, "1")}}, 0, "no records"},
		{[]MixSource{{N: 10, Rule: rule(t, Records, "5")}}, 100, "no source has a weight"},
		{[]MixSource{{N: 10, Rule: rule(t, Weight, "1")}, {N: 10, Rule: rule(t, Records, "50")}}, 40, "leaves no records"},
		{[]MixSource{{N: 10, Rule: rule(t, Weight, "1")}, {N: 3, Rule: rule(t, Repeat, "0.5")}}, 40, "fractional count"},
		{[]MixSource{{N: 10, Rule: rule(t, Weight, "1")}, {N: 10, Rule: rule(t, Weight, "0.001")}}, 100, "rounds to 0"},
	} {
		_, err := NewMixture(c.srcs, c.T)
		require.ErrorContains(t, err, c.msg)
		require.ErrorIs(t, err, ErrMixture)
	}
	for _, c := range []struct {
		k RuleKind
		s string
	}{{Weight, "-1"}, {Weight, "0"}, {Records, "2.5"}, {Records, "1000.0"}, {Records, "1e3"}, {Weight, "1/3"}, {Repeat, "x"}, {Repeat, "0x1/3"}, {Weight, "0x10"}, {Repeat, "1/0"}} {
		_, err := ParseRule(c.k, c.s)
		require.Error(t, err, "%v %s", c.k, c.s)
	}
}

// Numbers are read exactly and in base 10 (big.Rat alone reads "010" as octal).
func TestParseRuleExact(t *testing.T) {
	for text, want := range map[string]string{"1/010": "1/10", "010": "10", "0.7": "7/10", "2.5": "5/2", "1e3": "1000", "15e-1": "3/2", "0.0001": "1/10000"} {
		r, err := ParseRule(Repeat, text)
		require.NoError(t, err, text)
		require.Equal(t, want, r.Value.RatString(), text)
	}
	for _, c := range []struct {
		k RuleKind
		s string
	}{{Weight, "-1"}, {Repeat, "-1/3"}, {Records, "-5"}, {Weight, "-0.5"}} {
		_, err := ParseRule(c.k, c.s)
		require.ErrorContains(t, err, "must be positive", c.s)
	}
	_, err := NewMixture([]MixSource{{N: 10, Rule: rule(t, Repeat, "0.05")}, {N: 10, Rule: rule(t, Repeat, "0.05")}}, 0)
	require.ErrorContains(t, err, "epoch 0 would be empty")
	_, err = NewMixture([]MixSource{{N: 10, Rule: rule(t, Records, "281474976710656")}, {N: 10, Rule: rule(t, Weight, "1")}}, 0)
	require.ErrorContains(t, err, "at most")
	_, err = NewMixture([]MixSource{{N: 1<<48 - 5, Rule: rule(t, Weight, "1")}, {N: 7, Rule: rule(t, Repeat, "3/2")}}, 0)
	require.ErrorContains(t, err, "at most")
	// The last epoch of a fractional repeat: e+1 does not wrap.
	m, err := NewMixture([]MixSource{{N: 10, Rule: rule(t, Repeat, "1/3")}, {N: 100, Rule: rule(t, Weight, "1")}}, 0)
	require.NoError(t, err)
	me, err := m.Epoch(^uint64(0))
	require.NoError(t, err)
	require.LessOrEqual(t, me.Count(0), uint64(4))
	require.Equal(t, uint64(4), m.MaxCount(0))
}

// The golden mixture: pins the interleave and the source seeds, so a change is a conscious one.
func TestMixtureGolden(t *testing.T) {
	require.Equal(t, Derive(42, 6, 0, 1), SourceSeed(42, 1))
	il := NewInterleave([]uint64{7, 3})
	n := make([]uint64, 2)
	var got []int
	for s := il.Next(n); s >= 0; s = il.Next(n) {
		got = append(got, s)
	}
	require.Equal(t, []int{0, 1, 0, 0, 0, 1, 0, 0, 1, 0}, got)
}
