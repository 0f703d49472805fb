package shuffle

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strings"
)

// A mixture's order (docs/SHUFFLE.md, "Mixtures"): how many records each source gives to an
// epoch, which draws of its own order they are, and where they sit in the epoch. Everything is
// exact integer and rational arithmetic, so another implementation gets the same positions.

// DomainMixture derives a mixture's per-source seeds: seed_i = Derive(seed, DomainMixture, 0, i).
const DomainMixture = 6

// SourceSeed returns source i's seed in a mixture mounted with seed.
func SourceSeed(seed uint64, i int) uint64 { return Derive(seed, DomainMixture, 0, uint64(i)) }

// MaxMixtureRecords bounds the records of a mixture's epoch and of each source's share.
const MaxMixtureRecords = 1 << 48

// MaxSources bounds the sources of a mixture (the .source sidecar holds uint16 indices).
const MaxSources = 1 << 12

// RuleKind is how a source says how much of it an epoch takes.
type RuleKind int

const (
	Weight  RuleKind = iota // a share of the weighted sources' records
	Repeat                  // passes over the source per epoch, fractional allowed
	Records                 // an absolute count per epoch
)

var ruleNames = [...]string{Weight: "weight", Repeat: "repeat", Records: "records"}

func (k RuleKind) String() string { return ruleNames[k] }

// Rule is one source's share: its kind and its exact value (Text as written, for info.json).
type Rule struct {
	Kind  RuleKind
	Value *big.Rat
	Text  string
}

// ParseRule parses a rule's value as written: a decimal number ("0.7" is 7/10 exactly) or,
// for repeat, a fraction "a/b". Records must be a whole number.
func ParseRule(kind RuleKind, text string) (Rule, error) {
	text = strings.TrimSpace(text)
	pattern := decimal
	switch kind {
	case Repeat:
		pattern = decimalOrFraction
	case Records:
		pattern = whole
	}
	if !pattern.MatchString(text) {
		if kind == Records {
			return Rule{}, fmt.Errorf("records %s must be a whole number", text)
		}
		return Rule{}, fmt.Errorf("%s %q is not a number%s", kind, text, map[bool]string{true: " (a decimal such as 0.5, or a fraction \"1/3\")", false: " (a decimal such as 0.7)"}[kind == Repeat])
	}
	v, ok := exactRat(text)
	if !ok {
		return Rule{}, fmt.Errorf("%s %q is not a number", kind, text)
	}
	if v.Sign() <= 0 {
		return Rule{}, fmt.Errorf("%s %s must be positive", kind, text)
	}
	return Rule{Kind: kind, Value: v, Text: text}, nil
}

// exactRat parses a number the rule patterns accept, every integer in base 10 (big.Rat reads
// a leading 0 as octal).
func exactRat(text string) (*big.Rat, bool) {
	if a, b, ok := strings.Cut(text, "/"); ok {
		num, ok1 := new(big.Int).SetString(a, 10)
		den, ok2 := new(big.Int).SetString(b, 10)
		if !ok1 || !ok2 || den.Sign() == 0 {
			return nil, false
		}
		return new(big.Rat).SetFrac(num, den), true
	}
	mant, exp, _ := strings.Cut(strings.ToLower(text), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	num, ok := new(big.Int).SetString(intPart+frac, 10)
	if !ok {
		return nil, false
	}
	scale := -len(frac)
	if exp != "" {
		var e int
		if _, err := fmt.Sscan(exp, &e); err != nil || e > 64 || e < -64 {
			return nil, false
		}
		scale += e
	}
	r := new(big.Rat).SetInt(num)
	p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(scale, -scale))), nil))
	if scale >= 0 {
		return r.Mul(r, p), true
	}
	return r.Quo(r, p), true
}

// The numbers a rule is written with: decimal digits (a sign, refused later as not positive;
// no octal or hex, as JSON writes them), with a fraction part and an exponent for weight and repeat, a fraction a/b for repeat.
var (
	whole             = regexp.MustCompile(`^-?[0-9]+$`)
	decimal           = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	decimalOrFraction = regexp.MustCompile(`^-?([0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?|[0-9]+/[0-9]+)$`)
)

// MixSource is one source of a mixture: the records of its own epoch and its rule.
type MixSource struct {
	N    uint64
	Rule Rule
}

// Mixture is the order of a mixture of sources. Immutable after NewMixture; safe for
// concurrent use.
type Mixture struct {
	src   []MixSource
	fixed []uint64 // each source's records per epoch when the same every epoch; see constant
	// constant[i] reports whether source i gives the same count every epoch (all but a
	// repeat with r*N fractional).
	constant []bool
	rr       bool // the sources are a node's parts: a round-robin interleave (NewNodeMixture)
}

// ErrMixture marks a mixture that cannot be served (its message says why).
var ErrMixture = errors.New("mixture")

func mixErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMixture, fmt.Sprintf(format, args...))
}

// NewMixture checks the sources and computes the counts that are the same every epoch.
// epochRecords is the epoch's size in records (0: derived, see SHUFFLE.md).
func NewMixture(srcs []MixSource, epochRecords uint64) (*Mixture, error) {
	if len(srcs) == 0 {
		return nil, mixErr("no sources")
	}
	if len(srcs) > MaxSources {
		return nil, mixErr("%d sources; at most %d", len(srcs), MaxSources)
	}
	m := &Mixture{src: srcs, fixed: make([]uint64, len(srcs)), constant: make([]bool, len(srcs))}
	u, err := m.unweighted()
	if err != nil {
		return nil, err
	}
	most, empty := mostUnweighted(srcs)
	if empty && len(u.weighted) == 0 {
		return nil, mixErr("every source gives less than one record an epoch (repeat times its records), so epoch 0 would be empty: raise a repeat, or give a source a weight or records")
	}
	if most > MaxMixtureRecords {
		return nil, mixErr("an epoch would have up to %d records; at most %d", most, uint64(MaxMixtureRecords))
	}
	switch {
	case len(u.weighted) == 0 && epochRecords > 0:
		return nil, mixErr("epoch_records is given but no source has a weight: it sizes the weighted sources' share; leave it out, or give sources weights")
	case len(u.weighted) == 0:
		return m, nil
	case epochRecords > 0 && u.varying >= 0:
		return nil, mixErr("epoch_records is given with source %d, whose repeat %s of %d records gives a fractional count per epoch: give that source records, or leave epoch_records out", u.varying, srcs[u.varying].Rule.Text, srcs[u.varying].N)
	case epochRecords > MaxMixtureRecords:
		return nil, mixErr("epoch_records %d is more than %d", epochRecords, uint64(MaxMixtureRecords))
	case epochRecords > 0 && epochRecords <= u.others:
		return nil, mixErr("epoch_records %d leaves no records to the weighted sources: the sources without a weight give %d an epoch; raise epoch_records", epochRecords, u.others)
	}
	tw := u.derived
	if epochRecords > 0 {
		tw = epochRecords - u.others
	}
	if tw+most > MaxMixtureRecords {
		return nil, mixErr("the weighted sources would give %d records an epoch; at most %d (give epoch_records)", tw, uint64(MaxMixtureRecords))
	}
	m.apportion(u.weighted, u.wsum, tw)
	for _, i := range u.weighted {
		if m.fixed[i] == 0 {
			return nil, mixErr("source %d: weight %s of %d records an epoch rounds to 0 records; raise its weight or epoch_records", i, srcs[i].Rule.Text, tw)
		}
	}
	return m, nil
}

// mixCounts is what NewMixture learns of the sources before it shares out the weighted ones'.
type mixCounts struct {
	others   uint64   // records an epoch of the sources without a weight, when constant
	weighted []int    // the weighted sources
	wsum     *big.Rat // their weights
	derived  uint64   // their records
	varying  int      // a source whose count varies, if any; else -1
}

// unweighted checks every source's rule and sets the counts of the sources without a weight
// that are the same every epoch (records, and a repeat of a whole count).
func (m *Mixture) unweighted() (mixCounts, error) {
	u := mixCounts{wsum: new(big.Rat), varying: -1}
	for i, s := range m.src {
		if s.N == 0 {
			return u, mixErr("source %d has no records", i)
		}
		v := s.Rule.Value
		switch s.Rule.Kind {
		case Weight:
			u.weighted = append(u.weighted, i)
			u.wsum.Add(u.wsum, v)
			u.derived += s.N
			continue
		case Records:
			m.fixed[i], m.constant[i] = v.Num().Uint64(), true
			if !v.Num().IsUint64() || m.fixed[i] > MaxMixtureRecords {
				return u, mixErr("source %d: records %s is more than %d", i, s.Rule.Text, uint64(MaxMixtureRecords))
			}
		case Repeat:
			perEpoch := new(big.Rat).Mul(v, new(big.Rat).SetUint64(s.N))
			if perEpoch.Cmp(new(big.Rat).SetUint64(MaxMixtureRecords)) > 0 {
				return u, mixErr("source %d: repeat %s of %d records is more than %d records an epoch", i, s.Rule.Text, s.N, uint64(MaxMixtureRecords))
			}
			if perEpoch.IsInt() {
				m.fixed[i], m.constant[i] = perEpoch.Num().Uint64(), true
			} else {
				u.varying = i
			}
		}
		u.others += m.fixed[i]
	}
	return u, nil
}

// mostUnweighted returns the most records an epoch of the sources without a weight can have,
// and whether every one of them gives less than one record an epoch (true when there is none).
func mostUnweighted(srcs []MixSource) (most uint64, empty bool) {
	empty = true
	for _, s := range srcs {
		if s.Rule.Kind == Weight {
			continue
		}
		perEpoch := new(big.Rat).Mul(s.Rule.Value, new(big.Rat).SetUint64(s.N))
		if s.Rule.Kind == Records {
			perEpoch = s.Rule.Value
		}
		if perEpoch.Cmp(big.NewRat(1, 1)) >= 0 {
			empty = false
		}
		ceil := new(big.Int).Quo(new(big.Int).Add(perEpoch.Num(), new(big.Int).Sub(perEpoch.Denom(), big.NewInt(1))), perEpoch.Denom())
		most += ceil.Uint64()
	}
	return most, empty
}

// apportion splits tw records among the weighted sources by the largest remainder method.
func (m *Mixture) apportion(weighted []int, wsum *big.Rat, tw uint64) {
	type rem struct {
		i    int
		frac *big.Rat
	}
	rems := make([]rem, 0, len(weighted))
	var given uint64
	for _, i := range weighted {
		q := new(big.Rat).Mul(new(big.Rat).SetUint64(tw), m.src[i].Rule.Value)
		q.Quo(q, wsum)
		fl := new(big.Int).Quo(q.Num(), q.Denom()) // q >= 0: truncation is the floor
		m.fixed[i], m.constant[i] = fl.Uint64(), true
		given += m.fixed[i]
		rems = append(rems, rem{i, new(big.Rat).Sub(q, new(big.Rat).SetInt(fl))})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].frac.Cmp(rems[b].frac) > 0 })
	for k := 0; uint64(k) < tw-given; k++ {
		m.fixed[rems[k].i]++
	}
}

// MaxCount returns the most records source i gives an epoch.
func (m *Mixture) MaxCount(i int) uint64 {
	if m.constant[i] {
		return m.fixed[i]
	}
	v := m.src[i].Rule.Value
	n := new(big.Int).Mul(v.Num(), new(big.Int).SetUint64(m.src[i].N))
	n.Add(n, new(big.Int).Sub(v.Denom(), big.NewInt(1)))
	return n.Quo(n, v.Denom()).Uint64()
}

// MeanCount returns the records source i gives an epoch on average (r*N for a repeat).
func (m *Mixture) MeanCount(i int) float64 {
	if m.constant[i] {
		return float64(m.fixed[i])
	}
	f, _ := new(big.Rat).Mul(m.src[i].Rule.Value, new(big.Rat).SetUint64(m.src[i].N)).Float64()
	return f
}

// Sources returns the number of sources.
func (m *Mixture) Sources() int { return len(m.src) }

// Source returns source i.
func (m *Mixture) Source(i int) MixSource { return m.src[i] }

// Varies reports whether epochs have different record counts (a fractional repeat).
func (m *Mixture) Varies() bool {
	for _, c := range m.constant {
		if !c {
			return true
		}
	}
	return false
}

// drawsBefore returns K_i(e), source i's draws in the epochs before e, as a big integer.
func (m *Mixture) drawsBefore(i int, e uint64) *big.Int {
	return m.drawsBeforeBig(i, new(big.Int).SetUint64(e))
}

// drawsBeforeBig is drawsBefore for an epoch number past 2^64 - 1 (the end of the last epoch).
func (m *Mixture) drawsBeforeBig(i int, be *big.Int) *big.Int {
	be = new(big.Int).Set(be)
	if m.constant[i] {
		return be.Mul(be, new(big.Int).SetUint64(m.fixed[i]))
	}
	v := m.src[i].Rule.Value
	be.Mul(be, v.Num())
	be.Mul(be, new(big.Int).SetUint64(m.src[i].N))
	return be.Quo(be, v.Denom()) // non-negative: truncation is the floor
}

// Draw is where a source's draw is in its own epochs: position Pos of its epoch Pass.
type Draw struct{ Pass, Pos uint64 }

// MixEpoch is one epoch of a mixture: each source's count and first draw, and the interleave.
// Immutable; safe for concurrent use.
type MixEpoch struct {
	Interleave
	first []Draw
	n     []uint64 // the sources' own epoch lengths
}

// Epoch returns epoch e's counts, first draws and interleave. It fails when a source's pass
// passes 2^64 (an epoch number far beyond any training run).
func (m *Mixture) Epoch(e uint64) (*MixEpoch, error) {
	me := &MixEpoch{Interleave: Interleave{c: make([]uint64, len(m.src)), rr: m.rr}, first: make([]Draw, len(m.src)), n: make([]uint64, len(m.src))}
	for i, s := range m.src {
		k := m.drawsBefore(i, e)
		if m.constant[i] {
			me.c[i] = m.fixed[i]
		} else {
			next := new(big.Int).Add(new(big.Int).SetUint64(e), big.NewInt(1))
			me.c[i] = new(big.Int).Sub(m.drawsBeforeBig(i, next), k).Uint64()
		}
		pass, pos := new(big.Int).QuoRem(k, new(big.Int).SetUint64(s.N), new(big.Int))
		if !pass.IsUint64() {
			return nil, mixErr("epoch %d: source %d's pass is past 2^64", e, i)
		}
		me.first[i], me.n[i] = Draw{pass.Uint64(), pos.Uint64()}, s.N
		me.t += me.c[i]
	}
	return me, nil
}

// DrawOf returns where draw j of source i in this epoch is in the source's own epochs.
func (me *MixEpoch) DrawOf(i int, j uint64) Draw {
	f := me.first[i]
	q := f.Pos + j
	return Draw{f.Pass + q/me.n[i], q % me.n[i]}
}
