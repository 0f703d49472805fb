package mount

import (
	"fmt"
	"log"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/stack"
	"github.com/blockfs/blockfs/view"
)

// Nodes makes a mount node-aware (docs/SHUFFLE.md, "Many nodes"): node Node of Nodes serves
// its canonical parts of the data, the same ones every epoch. Nodes 0: a mount of the whole
// data (today's order).
type Nodes struct {
	Nodes int // --nodes: the job's node count; 0 for none
	Node  int // --node: this node, 0 <= Node < Nodes
	Parts int // --parts: the canonical parts; 0: shuffle.ChooseParts
}

// nodesPlan is the part of a Plan that a node-aware mount adds: the parts, a plan per part
// of this node (each a layout.Dataset.Sub of the whole) and the node's order over them.
type nodesPlan struct {
	at      shuffle.Nodes
	mine    []int    // this node's parts
	blocks  [][]int  // every part's blocks (shuffle.PartBlocks)
	records []uint64 // every part's records
	srcs    []*Plan  // a plan per part of mine
	mix     int      // the window K (nodeMix); each part's is shuffle.PartWindow of it
	order   *shuffle.Mixture
}

// planNodes plans a node-aware mount of p's dataset (opened, its mount point checked): its
// parts, each ordered as a dataset of its own with its own seed and window (nodeMix: from the
// data and the parts alone, the same at every node count), and the memory
// of this node's parts under one cache. req is the order asked for (Mix 0: auto).
func (p *Plan) planNodes(req shuffle.Options) error {
	o, ds := p.opt.Nodes, p.ds
	np := &nodesPlan{at: shuffle.Nodes{Parts: shuffle.ChooseParts(o.Parts, ds.Blocks()), Nodes: o.Nodes, Node: o.Node}}
	if err := np.at.Validate(ds.Blocks()); err != nil {
		return Usagef("%v", err)
	}
	np.mine = np.at.PartsOf()
	np.blocks = shuffle.PartBlocks(ds.Blocks(), np.at.Parts, req.Seed)
	np.records = make([]uint64, np.at.Parts)
	for q, bs := range np.blocks {
		for _, b := range bs {
			np.records[q] += ds.BlockRecords(b)
		}
	}
	k, why := nodeMix(ds, req, np.at.Parts)
	np.mix = k
	var counts []uint64
	shares := make([]float64, len(np.mine))
	for _, q := range np.mine {
		sub := &Plan{opt: p.opt, loc: p.loc, ds: ds.Sub(np.blocks[q]), mnt: p.mnt}
		so := req
		so.Seed, so.Mix = shuffle.PartSeed(req.Seed, q), shuffle.PartWindow(k, len(np.blocks[q]))
		sub.opt.Order, sub.order = ChooseOrder(sub.ds, so)
		sub.order.Auto, sub.order.Warning = req.Mix == 0, "" // the part's spread is not the epoch's
		if sub.order.Auto {
			sub.order.Why = why
		}
		if err := sub.opt.Order.Validate(); err != nil {
			return Usagef(flag("mix")+" %d: %v", sub.opt.Order.Mix, err)
		}
		np.srcs = append(np.srcs, sub)
		counts = append(counts, sub.ds.Records())
	}
	var mine uint64 // the node's bytes: each part's share of the budget is of them
	for _, sub := range np.srcs {
		mine += sub.ds.Bytes()
	}
	for i, sub := range np.srcs {
		shares[i] = float64(sub.ds.Bytes()) / float64(max(1, mine))
	}
	var err error
	if np.order, err = shuffle.NewNodeMixture(counts); err != nil {
		return Usagef("%v", err)
	}
	p.nodes = np
	versions := np.versions(ds, req, k)
	for _, sub := range np.srcs {
		sub.order.Versions = versions
	}
	p.order = np.srcs[0].order // every part's choice is alike; info.json lists each
	if p.opt.Readahead == AutoReadahead {
		// Every part reads at once: a part's readahead is its next window, however many
		// parts the node has.
		p.opt.Readahead = memory.NeedCache(ds, k, 0, cache.DefaultPageSize).Window * int64(len(np.mine))
	}
	if err := p.planSources(np.srcs, shares, p.opt.Data, p.loc.Abs, ds.Manifest.Fingerprint(), false); err != nil {
		return err
	}
	for _, sub := range np.srcs {
		p.mem.ResidentBlocks += sub.mem.ResidentBlocks
	}
	return nil
}

// streams returns which of the dataset's files are read with O_DIRECT: each part's plan says
// for its blocks (its resident set is read buffered, kept by the kernel), and the files of
// other nodes' parts, never read here, stream.
func (np *nodesPlan) streams() func(source.FileID) bool {
	at := map[int][2]int{} // the dataset's block -> (part of mine, the part's block)
	for i, q := range np.mine {
		for k, b := range np.blocks[q] {
			at[b] = [2]int{i, k}
		}
	}
	return func(id source.FileID) bool {
		e, ok := at[layout.BlockOfFile(id)]
		if !ok {
			return true
		}
		return np.srcs[e[0]].mem.Streams(layout.RoleFile(e[1], layout.RoleOfFile(id)))
	}
}

// versions returns the order versions that give every part's order, of this node's parts and
// the others' (a saved position resumes at any node count): both where no part's window holds
// more than shuffle.BijectionFrom records. The window k does not depend on the version.
func (np *nodesPlan) versions(ds *layout.Dataset, req shuffle.Options, k int) []int {
	if req.Mode == shuffle.Full {
		for _, bs := range np.blocks {
			counts := make([]uint64, len(bs))
			for i, b := range bs {
				counts[i] = ds.BlockRecords(b)
			}
			o := req
			o.Mix = shuffle.PartWindow(k, len(bs))
			if shuffle.MaxWindowRecords(counts, o) > shuffle.BijectionFrom {
				return []int{req.OrderVersion()}
			}
		}
	}
	return []int{shuffle.Version1, shuffle.Version2}
}

// nodeMix returns the window of every part of a node-aware mount and why: --mix when given;
// otherwise (full shuffle) enough blocks that a batch of QualityBatch whole-epoch positions,
// QualityBatch/P records of each part, draws them from distinct blocks (1.5 x QualityBatch / P
// blocks a window), at most 64 MiB of a part's average block a window, and at most the
// smallest part's blocks. It depends on the data and the parts alone (never on the node count
// or the memory): every node and every resume at another node count orders a part alike.
func nodeMix(ds *layout.Dataset, req shuffle.Options, parts int) (int, string) {
	if req.Mix != 0 {
		return req.Mix, flag("mix") + " given"
	}
	if req.Mode != shuffle.Full {
		return 1, fmt.Sprintf(flag("shuffle")+" %s has no windows", req.Mode)
	}
	avg := max(1, storedBytes(ds)/int64(ds.Blocks()))
	k := min(int64(3*QualityBatch+2*parts-1)/int64(2*parts), max(1, nodeWindowBytes/avg), int64(ds.Blocks()/parts))
	k = max(1, k)
	return int(k), fmt.Sprintf("node-aware: windows of %d blocks in each of the %d parts, so that a global batch of %d draws from about as many blocks as a uniform shuffle's", k, parts, QualityBatch)
}

// nodeWindowBytes bounds an automatic window of a part of a node-aware mount: a node reads
// its parts at once, so its cache holds a window of each.
const nodeWindowBytes = 64 << 20

// keep returns the FileIDs of the node's parts, part by part, for the disk cache's fixed set:
// a node keeps what it reads.
func (np *nodesPlan) keep(ds *layout.Dataset) []source.FileID {
	var out []source.FileID
	if id, ok := ds.Names(); ok {
		out = append(out, id) // small, and every node's
	}
	for _, q := range np.mine {
		for _, b := range np.blocks[q] {
			for r := layout.RoleData; r <= layout.RoleOffsets; r++ {
				out = append(out, layout.RoleFile(b, r))
			}
		}
	}
	return out
}

// build opens the node's tree over the whole dataset's stack st: a cache namespace per part
// (stack.Stack.Parts), the last one the whole dataset's (its names file), and the node's epochs
// over them.
func (np *nodesPlan) buildParts(p *Plan, st *stack.Stack) (*served, error) {
	sv := &served{stacks: []*stack.Stack{st}, node: true}
	parts := make([]*layout.Dataset, len(np.srcs))
	for i, sub := range np.srcs {
		parts[i] = sub.ds
	}
	sv.mux = st.Parts(parts)
	c, err := cache.New(sv.mux, p.cacheOpt)
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.cache = c
	sets := make([]*view.Set, len(np.srcs))
	for i, sub := range np.srcs {
		// Room for four windows of the part (OrderBudget's readers), without its floor (up to 4 MiB).
		order := max(4*int64(shuffle.MaxWindowBytes(sub.ds.BlockCounts(), sub.opt.Order)), 64<<10)
		if sets[i], err = view.NewSet(sub.ds, c.Namespace(i), view.SetOptions{Order: sub.opt.Order, Share: order, Exact: true}); err != nil {
			c.Close()
			sv.close()
			return nil, fmt.Errorf("part %d: %w", np.mine[i], err)
		}
	}
	m, err := view.NewNode(sets, np.order, c, p.ds.Dir, np.facts(p))
	if err != nil {
		c.Close()
		sv.close()
		return nil, err
	}
	whole := c.Namespace(len(np.srcs))
	m.Names = func() (view.File, bool) { return view.OpenNames(p.ds, whole) }
	sv.tree = m
	return sv, nil
}

// facts returns info.json's facts of a node's mount: the dataset's, in the order asked for,
// and "nodes": the parts, which are this node's, and every part's records, so that a reader
// can find where each node's epoch resumes (docs/SHUFFLE.md, "Many nodes").
func (np *nodesPlan) facts(p *Plan) map[string]any {
	f := view.DatasetFacts(p.ds, np.srcs[0].opt.Order)
	f["seed"], f["mix"] = p.opt.Order.Seed, np.mix // the same on every node (a part's own window varies)
	f["dataset_records"] = p.ds.Records()
	var parts []map[string]any
	for i, sub := range np.srcs {
		parts = append(parts, map[string]any{"part": np.mine[i], "blocks": sub.ds.Blocks(), "records": sub.ds.Records(),
			"seed": sub.opt.Order.Seed, "mix": max(1, sub.opt.Order.Mix), "order": sub.order, "memory": sub.mem.Facts(), "readahead": sub.readahead})
	}
	nodeRecords := make([]uint64, np.at.Nodes)
	for q, n := range np.records {
		nodeRecords[q%np.at.Nodes] += n
	}
	f["nodes"] = map[string]any{
		"nodes": np.at.Nodes, "node": np.at.Node, "parts": np.at.Parts, "part_records": np.records,
		"node_records": nodeRecords, "own_parts": parts, "part_seed_domain": shuffle.DomainPart,
	}
	return f
}

// logServing logs what a node serves.
func (np *nodesPlan) logServing(p *Plan) {
	var n uint64
	for _, sub := range np.srcs {
		n += sub.ds.Records()
	}
	log.Printf("blockfs: serving node %d of %d of %s (%d of its %d records: parts %v of %d) at %s; shuffle %s, mix %d a part (%s), seed %d",
		np.at.Node, np.at.Nodes, p.ds.Dir, n, p.ds.Records(), np.mine, np.at.Parts, p.mnt, p.opt.Order.Mode,
		max(1, np.srcs[0].opt.Order.Mix), np.srcs[0].order.Why, p.opt.Order.Seed)
}
