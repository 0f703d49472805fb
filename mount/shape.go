package mount

import (
	"fmt"
	"log"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/view"
)

// A shape is what a plan serves, and what differs by it: one dataset's epochs (onePlan), a
// mixture's (mixPlan), a dataset with fields' (fieldsPlan) or a node's parts of one dataset
// (nodesPlan). Plan.shape returns a plan's; each variant keeps its own state in its type, and
// the code that serves a plan asks the shape rather than which variant it is.
type shape interface {
	// sources returns the plans below the mount's cache, one cache namespace each.
	sources(p *Plan) []*Plan
	// build opens the stacks of sources, the cache and the tree a mount of p serves.
	build(p *Plan) (*served, error)
	// names names the sources in stats.json; nil: the stats are one dataset's.
	names() []string
	// warnings returns what the user should hear before the mount starts.
	warnings(p *Plan) []string
	// logServing logs what the mount serves and its order.
	logServing(p *Plan)
}

// shape returns the plan's shape.
func (p *Plan) shape() shape {
	switch {
	case p.mix != nil:
		return p.mix
	case p.fields != nil:
		return p.fields
	case p.nodes != nil:
		return p.nodes
	}
	return onePlan{}
}

// onePlan is the shape of a plan of one dataset, p.ds, served whole.
type onePlan struct{}

func (onePlan) sources(p *Plan) []*Plan { return []*Plan{p} }
func (onePlan) names() []string         { return nil }

func (onePlan) build(p *Plan) (*served, error) {
	return p.buildSources(func(c *cache.Cache) (view.Content, error) {
		return view.NewSet(p.ds, c, view.SetOptions{Order: p.opt.Order})
	})
}

func (onePlan) warnings(p *Plan) []string {
	if p.order.Warning == "" {
		return nil
	}
	return []string{p.order.Warning}
}

func (onePlan) logServing(p *Plan) {
	o := p.opt.Order
	log.Printf("blockfs: serving %s (%d records, %s, %d blocks) at %s; shuffle %s, mix %d (%s), seed %d",
		p.ds.Dir, p.ds.Records(), ibytes(int64(p.ds.Bytes())), p.ds.Blocks(), p.mnt, o.Mode, max(1, o.Mix), p.order.Why, o.Seed)
}

// sourceSets returns a Set for each of plans, in its namespace of c with its share of the
// cache; named says which source an error is of.
func sourceSets(c *cache.Cache, plans []*Plan, named func(i int, err error) error) ([]*view.Set, error) {
	var sets []*view.Set
	for i, sub := range plans {
		o := view.SetOptions{Order: sub.opt.Order, Share: sub.mem.CacheSize}
		if sub.byIndex {
			o.Share, o.Exact = 0, true // read in the anchor's order: no windows of its own to keep
		}
		set, err := view.NewSet(sub.ds, c.Namespace(i), o)
		if err != nil {
			return nil, named(i, err)
		}
		sets = append(sets, set)
	}
	return sets, nil
}

func (f *fieldsPlan) sources(*Plan) []*Plan { return f.srcs }

func (f *fieldsPlan) build(p *Plan) (*served, error) {
	return p.buildSources(func(c *cache.Cache) (view.Content, error) {
		sets, err := sourceSets(c, f.srcs, func(i int, err error) error {
			return fmt.Errorf("field %q: %w", f.man.Fields[i].Name, err)
		})
		if err != nil {
			return nil, err
		}
		fl, err := view.NewFields(sets, f.names(), f.own(), c, f.dir, f.facts())
		if err != nil {
			return nil, err
		}
		for _, sub := range f.srcs {
			fl.Ahead = append(fl.Ahead, sub.readahead)
		}
		return fl, nil
	})
}

// warnings of a dataset with fields are its order's, which every field shares.
func (f *fieldsPlan) warnings(*Plan) []string { return f.srcs[0].Warnings() }

func (f *fieldsPlan) logServing(p *Plan) {
	o := p.opt.Order
	log.Printf("blockfs: serving %s (%d records with fields %v) at %s; shuffle %s, mix %d (%s), seed %d",
		f.dir, f.man.Records, f.names(), p.mnt, o.Mode, max(1, o.Mix), p.order.Why, o.Seed)
}

func (m *mixPlan) sources(*Plan) []*Plan { return m.srcs }

func (m *mixPlan) names() []string {
	var names []string
	for _, src := range m.spec.Sources {
		names = append(names, src.Name)
	}
	return names
}

func (m *mixPlan) build(p *Plan) (*served, error) {
	return p.buildSources(func(c *cache.Cache) (view.Content, error) {
		sets, err := sourceSets(c, m.srcs, func(i int, err error) error { return sourceErr(m.spec, i, err) })
		if err != nil {
			return nil, err
		}
		mx, err := view.NewMixture(sets, m.order, c, m.spec.File, m.facts(p.opt.Order.Seed))
		if err != nil {
			return nil, mixtureErr(m.spec, err)
		}
		return mx, nil
	})
}

func (m *mixPlan) warnings(*Plan) []string {
	var out []string
	for i, sub := range m.srcs {
		for _, w := range sub.Warnings() {
			out = append(out, fmt.Sprintf("source %d (%s): %s", i, m.spec.Sources[i].Name, w))
		}
	}
	return out
}

func (m *mixPlan) logServing(p *Plan) {
	o := p.opt.Order
	me, _ := m.order.Epoch(0)
	log.Printf("blockfs: serving the mixture %s (%d records in epoch 0 from %d sources) at %s; seed %d", m.spec.File, me.Len(), len(m.srcs), p.mnt, o.Seed)
	for i, sub := range m.srcs {
		so := sub.opt.Order
		log.Printf("blockfs: source %d (%s): %s, %d records, %d an epoch (%s %s); shuffle %s, mix %d (%s), seed %d", i, m.spec.Sources[i].Name,
			sub.ds.Dir, sub.ds.Records(), me.Count(i), m.spec.Sources[i].Rule.Kind, m.spec.Sources[i].Rule.Text, so.Mode, max(1, so.Mix), sub.order.Why, so.Seed)
	}
}

// A node's parts are one dataset's under one stack (stack.Stack.Parts): one source, the
// plan's own, and one dataset's stats and warnings.
func (np *nodesPlan) sources(p *Plan) []*Plan   { return []*Plan{p} }
func (np *nodesPlan) names() []string           { return nil }
func (np *nodesPlan) warnings(p *Plan) []string { return onePlan{}.warnings(p) }

func (np *nodesPlan) build(p *Plan) (*served, error) {
	st, err := p.openSources()
	if err != nil {
		return nil, err
	}
	return np.buildParts(p, st)
}
