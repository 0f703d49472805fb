package shuffle

import (
	"math/big"

	"github.com/blockfs/blockfs/internal/optname"
)

// A node-aware order (docs/SHUFFLE.md, "Many nodes"): the blocks are dealt once, for every
// epoch, to P canonical parts; node I of N keeps the parts p with p mod N == I in every
// epoch, so a node reads the same blocks epoch after epoch; each part has its own
// block-shuffled order, new each epoch; and every epoch is the round-robin interleave of the
// parts (round j takes record j of every part with more than j records, parts in index
// order), of which a node's epoch is its own parts' positions. A prefix of the interleave is
// a prefix of every node's epoch at any node count that divides P, so a position in it is a
// resume point for any such count.

const (
	// DomainParts deals the blocks to the parts: the canonical block permutation.
	DomainParts = 7
	// DomainPart seeds each part's own order: seed_p = Derive(seed, DomainPart, 0, p).
	DomainPart = 8
)

// DefaultParts is the canonical part count when none is given and the data has as many
// blocks: divisible by 1, 2, 3, 4, 6, 8, 12, 16, 24 and 48 nodes.
const DefaultParts = 48

// MaxParts bounds the parts (a mixture's sources are bounded alike).
const MaxParts = MaxSources

// ChooseParts returns the parts of a dataset of blocks blocks: parts when given (> 0), else
// the largest of 48, 24, 12, 6, 4, 3, 2 and 1 with at least 4 blocks for each part (so that
// a part's own order still shuffles blocks, and a small dataset does not hold a cache page
// for each of dozens of parts). It depends on the data alone, never on the node count, so a
// job keeps its order at any node count.
func ChooseParts(parts, blocks int) int {
	if parts > 0 {
		return parts
	}
	for _, p := range []int{DefaultParts, 24, 12, 6, 4, 3, 2} {
		if 4*p <= blocks {
			return p
		}
	}
	return 1
}

// Nodes is where a node stands among the nodes of a node-aware mount.
type Nodes struct {
	Parts int // canonical parts, P
	Nodes int // nodes, N (divides P)
	Node  int // this node, I (< N)
}

// Validate checks the node options against a dataset of blocks blocks.
func (n Nodes) Validate(blocks int) error {
	switch {
	case n.Nodes < 1:
		return optname.Errorf("nodes", "%s %d: need at least 1", optname.Flag("nodes"), n.Nodes)
	case n.Node < 0 || n.Node >= n.Nodes:
		return optname.Errorf("node", "%s %d of %s %d: need 0 <= node < nodes", optname.Flag("node"), n.Node, optname.Flag("nodes"), n.Nodes)
	case n.Parts < 1 || n.Parts > MaxParts:
		return optname.Errorf("parts", "%s %d is out of range (1 to %d)", optname.Flag("parts"), n.Parts, MaxParts)
	case n.Parts > blocks:
		return optname.Errorf("parts", "%s %d is more than the dataset's %d blocks: each part holds whole blocks; lower %s (it must stay a multiple of %s)",
			optname.Flag("parts"), n.Parts, blocks, optname.Flag("parts"), optname.Flag("nodes"))
	case n.Parts%n.Nodes != 0:
		return optname.Errorf("nodes", "%s %d does not divide the %d canonical parts: a node keeps whole parts; run on a node count that divides %d, or give %s a multiple of %d (another order: start a new job, not a resume)",
			optname.Flag("nodes"), n.Nodes, n.Parts, n.Parts, optname.Flag("parts"), n.Nodes)
	}
	return nil
}

// PartsOf returns the node's parts, ascending.
func (n Nodes) PartsOf() []int {
	var out []int
	for p := n.Node; p < n.Parts; p += n.Nodes {
		out = append(out, p)
	}
	return out
}

// PartBlocks deals blocks stored blocks to parts parts with seed: the canonical permutation
// pi = permutation(blocks, RNG(derive(seed, DomainParts, 0, 0))) puts block pi[k] in part
// k mod parts; out[p] lists part p's blocks in k order. O(blocks).
func PartBlocks(blocks, parts int, seed uint64) [][]int {
	pi := Permutation(blocks, NewRNG(Derive(seed, DomainParts, 0, 0)))
	out := make([][]int, parts)
	for k, b := range pi {
		out[k%parts] = append(out[k%parts], int(b))
	}
	return out
}

// PartWindow returns the window of a part of blocks blocks in a node-aware mount whose window
// is k: the part's blocks cut into ceil(blocks / k) windows as even as the count allows,
// ceil(blocks / ceil(blocks / k)) blocks each (the last one fewer), so that no part ends its
// epoch on a short window of a block or two (on data stored in order, a batch of one class).
func PartWindow(k, blocks int) int {
	if k <= 1 || blocks <= 1 {
		return 1
	}
	w := (blocks + k - 1) / k
	return (blocks + w - 1) / w
}

// PartSeed returns part p's seed in a mount seeded with seed.
func PartSeed(seed uint64, p int) uint64 { return Derive(seed, DomainPart, 0, uint64(p)) }

// NewNodeMixture returns the order of a node's epochs over its parts, whose own epochs have
// records[i] records: each epoch takes every part's epoch of the same number once, in the
// round-robin interleave.
func NewNodeMixture(records []uint64) (*Mixture, error) {
	srcs := make([]MixSource, len(records))
	for i, n := range records {
		srcs[i] = MixSource{N: n, Rule: Rule{Kind: Repeat, Value: big.NewRat(1, 1), Text: "1"}}
	}
	m, err := NewMixture(srcs, 0)
	if err != nil {
		return nil, err
	}
	m.rr = true
	return m, nil
}
