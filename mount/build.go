package mount

import (
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
// are its sources (source.Mux), or a node's parts (nodesPlan.buildParts).
func (p *Plan) build() (*served, error) { return p.shape().build(p) }

// buildSources is build for a plan of one or several sources, each with its stack, under one
// cache; tree makes what the mount serves over it.
func (p *Plan) buildSources(tree func(c *cache.Cache) (view.Content, error)) (*served, error) {
	sv := &served{}
	p.grows = p.growable()
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
	if p.grows {
		p.cacheOpt.Max = p.growMax()
	}
	c, err := cache.New(src, p.cacheOpt)
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.cache = c
	if sv.tree, err = tree(c); err != nil {
		c.Close()
		sv.close()
		return nil, err
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
	names := p.shape().names()
	if names == nil {
		return report.NewMount(sv.cache, sv.stacks, nil, nil)
	}
	return report.NewMount(sv.cache, sv.stacks, sv.mux, names)
}
