package mount

import (
	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/view"
)

// Data is data opened for reading without a mount (blockfs order and info): one dataset, a
// dataset with fields or a mixture, each source opened and ordered as a mount of it would be.
// Its stack (sources, cache, tree) is built on first use by the builder Serve uses
// (Plan.build), over a small cache with one worker. Not safe for concurrent use; Close
// releases it.
type Data struct {
	p  *Plan
	sv *served // nil until built
}

// readCache is the cache of data read without a mount, per source (at least minReadCache):
// order reads an epoch's ids through it a few MiB at a time.
const (
	readCache    = 4 << 20
	minReadCache = 16 << 20
)

// Open opens the data opt names for reading without a mount: a dataset (opt.InPlace for a
// file in place or windows over rows, opt.S3 for an object store), a dataset with fields, or
// the mixture opt.Mixture (opt.Data then names the mixture file), in the order opt.Order asks
// for (Mix 0: ChooseOrder's). Nothing is read below the datasets' manifests until an epoch
// is; the mount's own options (a mount point, a cache size, a disk cache, --verify, nodes) are
// not used. Errors in opt wrap ErrUsage. The caller calls Close once done.
func Open(opt Options) (*Data, error) {
	p, err := openRead(opt)
	if err != nil {
		return nil, err
	}
	p.planRead()
	return &Data{p: p}, nil
}

// openRead opens the data of a Plan for reading: its sources, each ordered, with no mount
// point and no memory plan.
func openRead(opt Options) (*Plan, error) {
	if opt.Mixture != nil {
		if opt.InPlace.given() {
			return nil, Usagef("%s is a mixture: flags of a file in place go in its sources' \"options\"", opt.Data)
		}
		m, err := openMixture(opt)
		if err != nil {
			return nil, err
		}
		return &Plan{opt: opt, loc: Location{Kind: MixtureFile, Name: opt.Data, Abs: opt.Mixture.File}, mix: m}, nil
	}
	man, sd, err := withFields(opt)
	switch {
	case err != nil:
		return nil, err
	case man != nil:
		return openFieldsOrdered(opt, man, sd)
	case sd != nil:
		return sd.plain(opt)
	}
	return openSource(opt)
}

// openFieldsOrdered opens a dataset with fields for reading: every field in the largest's
// order, as ChooseOrder chooses it (a mount may lower an automatic window to fit its memory).
func openFieldsOrdered(opt Options, man *layout.FieldsManifest, sd *shardsData) (*Plan, error) {
	p, err := openFields(opt, man, sd)
	if err != nil {
		return nil, err
	}
	p.fields.shareOrder(p)
	return p, nil
}

// planRead plans the stack of data read without a mount: local files read buffered (no
// O_DIRECT, no resident set), an object store as it is (no disk cache), no --verify, and a
// cache of readCache a source, with one worker, whose whole budget each source's order state
// may take.
func (p *Plan) planRead() {
	srcs := p.sources()
	size := max(minReadCache, int64(len(srcs))*readCache)
	p.cacheOpt = cache.Options{Size: size, Workers: 1}
	for _, sub := range srcs {
		sub.mem = memory.Plan{CacheSize: size}
		sub.disk = nil
		sub.opt.Verify = false
	}
}

// sources returns the plans of the sources below the plan's cache: its own, a mixture's or
// a dataset with fields'.
func (p *Plan) sources() []*Plan { return p.shape().sources(p) }

// tree builds the stack on first use and returns its tree.
func (d *Data) tree() (view.Content, error) {
	if d.sv != nil {
		return d.sv.tree, nil
	}
	if m := d.p.mix; m != nil {
		for i, sub := range m.srcs {
			if sub.loc.Kind == Remote {
				return nil, sourceErr(m.spec, i, Usagef("%s is in an object store: mount the mixture and run order on the mount point", sub.loc.Name))
			}
		}
	}
	sv, err := d.p.build()
	if err != nil {
		return nil, err
	}
	d.sv = sv
	return sv.tree, nil
}

// Close releases the stack, if it was built.
func (d *Data) Close() {
	if d.sv == nil {
		return
	}
	d.sv.cache.Close()
	d.sv.close()
	d.sv = nil
}

// Warnings returns what the user should hear of the order: one far from uniform (a source's
// or a field's, named).
func (d *Data) Warnings() []string { return d.p.Warnings() }
