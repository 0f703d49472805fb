package mount

import (
	"fmt"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/mount/report"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/stack"
	"github.com/blockfs/blockfs/view"
)

// served is what Serve mounts: the tree, its cache, and the stacks of sources below it.
type served struct {
	tree   view.Content
	cache  *cache.Cache
	stacks []*stack.Stack
	mux    *source.Mux // a mixture's sources under the cache
	node   bool        // a node-aware mount: its parts under mux, one dataset's stack
}

// build is the one builder of a stack: it opens the sources, the cache and the tree of a plan,
// a mount's (Serve) or data read without a mount (Open, whose plan asks for a small cache):
// one dataset's epochs, a mixture's or a dataset with fields' over one cache whose namespaces
// are its sources (source.Mux), or a node's parts (nodesPlan.build).
func (p *Plan) build() (*served, error) {
	if p.nodes == nil {
		return p.buildSources()
	}
	st, err := p.openSources()
	if err != nil {
		return nil, err
	}
	return p.nodes.build(p, st)
}

// buildSources is build for a plan of one or several sources, each with its stack.
func (p *Plan) buildSources() (*served, error) {
	sv := &served{}
	plans := p.sources()
	for _, sub := range plans {
		st, err := sub.openSources()
		if err != nil {
			sv.close()
			return nil, err
		}
		sv.stacks = append(sv.stacks, st)
	}
	src := sv.stacks[0].Blocks
	if len(plans) > 1 || p.ds == nil {
		sv.mux = stack.Join(sv.stacks)
		src = sv.mux
	}
	c, err := cache.New(src, p.cacheOpt)
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.cache = c
	if p.mix == nil && p.fields == nil {
		if sv.tree, err = view.NewSet(p.ds, c, view.SetOptions{Order: p.opt.Order}); err != nil {
			c.Close()
			sv.close()
			return nil, err
		}
		return sv, nil
	}
	var sets []*view.Set
	for i, sub := range plans {
		o := view.SetOptions{Order: sub.opt.Order, Share: sub.mem.CacheSize}
		if sub.byIndex {
			o.Share, o.Exact = 0, true // read in the anchor's order: no windows of its own to keep
		}
		set, err := view.NewSet(sub.ds, c.Namespace(i), o)
		if err != nil {
			c.Close()
			sv.close()
			if p.fields != nil {
				return nil, fmt.Errorf("field %q: %w", p.fields.man.Fields[i].Name, err)
			}
			return nil, sourceErr(p.mix.spec, i, err)
		}
		sets = append(sets, set)
	}
	if p.fields != nil {
		fl, err := view.NewFields(sets, p.fields.names(), p.fields.own(), c, p.fields.dir, p.fields.facts())
		if err != nil {
			c.Close()
			sv.close()
			return nil, err
		}
		for _, sub := range plans {
			fl.Ahead = append(fl.Ahead, sub.readahead)
		}
		sv.tree = fl
		return sv, nil
	}
	if sv.tree, err = view.NewMixture(sets, p.mix.order, c, p.mix.spec.File, p.mix.facts(p.opt.Order.Seed)); err != nil {
		c.Close()
		sv.close()
		return nil, mixtureErr(p.mix.spec, err)
	}
	return sv, nil
}

// close closes the stacks of sources.
func (s *served) close() {
	for _, st := range s.stacks {
		st.Close()
	}
}

// statsOf returns the stats of the mount of sv: one dataset's (a node-aware mount's parts
// are one dataset's), or a mixture's or fields' by source.
func (p *Plan) statsOf(sv *served) *report.Mount {
	if sv.mux == nil || p.nodes != nil {
		return report.NewMount(sv.cache, sv.stacks, nil, nil)
	}
	var names []string
	switch {
	case p.mix != nil:
		for _, src := range p.mix.spec.Sources {
			names = append(names, src.Name)
		}
	case p.fields != nil:
		names = p.fields.names()
	}
	return report.NewMount(sv.cache, sv.stacks, sv.mux, names)
}
