package mount

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/shuffle"
)

// Mixture is a mount of several datasets in one epoch file (docs/SHUFFLE.md, "Mixtures"):
// what a mixture file says, each source's options resolved (the command line turns a source's
// "options" into its Options as it does its own flags).
type Mixture struct {
	Name         string // the mixture file as the user named it (in messages)
	File         string // the mixture file, absolute
	EpochRecords uint64 // the epoch's records; 0: derived from the weighted sources
	Sources      []Source
}

// Source is one source of a mixture.
type Source struct {
	Name string       // as info.json names it
	Rule shuffle.Rule // how much of it an epoch takes
	// Opt is the source's own mount: Data, InPlace, Order (Seed used only when SeedGiven),
	// S3, DiskCache, DiskCacheSize and Verify. The rest are the whole mount's.
	Opt       Options
	SeedGiven bool
}

// mixPlan is the part of a Plan that a mixture adds: a plan per source (opened, ordered and
// given its share of memory) and the mixture's order.
type mixPlan struct {
	spec  *Mixture
	srcs  []*Plan
	order *shuffle.Mixture
	fp    string
}

// newMixture checks and plans a mount of the mixture opt.Mixture. Errors in it wrap ErrUsage
// and name the source.
func newMixture(opt Options) (*Plan, error) {
	spec := opt.Mixture
	if opt.InPlace.given() {
		return nil, Usagef("%s is a mixture: flags of a file in place go in its sources' \"options\"", opt.Data)
	}
	p := &Plan{opt: opt, loc: Location{Kind: MixtureFile, Name: opt.Data, Abs: spec.File}}
	var err error
	if p.mix, err = openMixture(opt); err != nil {
		return nil, err
	}
	m := p.mix
	wheres := make([]string, len(m.srcs))
	for i, sub := range m.srcs {
		wheres[i] = sub.ds.Where()
	}
	if err := p.checkMount(wheres, m.srcs, func(i int, err error) error { return sourceErr(spec, i, err) }); err != nil {
		return nil, err
	}
	if err := p.planMixture(); err != nil {
		return nil, err
	}
	m.fp = m.fingerprint(opt.Order.Seed) // after the plan: a window lowered to fit changes the order
	for i, sub := range m.srcs {
		if err := sub.finish(); err != nil {
			return nil, sourceErr(spec, i, err)
		}
	}
	return p, nil
}

// openMixture opens the sources of the mixture opt.Mixture, each as a mount of it alone would
// (seeded by SourceSeed unless it gives a seed), and computes the mixture's order.
func openMixture(opt Options) (*mixPlan, error) {
	spec := opt.Mixture
	m := &mixPlan{spec: spec}
	var srcs []shuffle.MixSource
	disks := map[string]int{}
	for i, s := range spec.Sources {
		so := s.Opt
		so.Mountpoint, so.Epochs, so.Indexer = opt.Mountpoint, opt.Epochs, opt.Indexer
		if !s.SeedGiven {
			so.Order.Seed = shuffle.SourceSeed(opt.Order.Seed, i)
		}
		sub, err := openSource(so)
		if err != nil {
			return nil, sourceErr(spec, i, err)
		}
		if so.DiskCache != "" {
			dir, _ := filepath.Abs(so.DiskCache)
			if j, ok := disks[dir]; ok {
				return nil, Usagef("%s: sources %d and %d both keep their disk cache in %s: give each its own \"disk_cache\"", spec.name(), j, i, so.DiskCache)
			}
			disks[dir] = i
		}
		m.srcs = append(m.srcs, sub)
		srcs = append(srcs, shuffle.MixSource{N: sub.ds.Records(), Rule: s.Rule})
	}
	var err error
	if m.order, err = shuffle.NewMixture(srcs, spec.EpochRecords); err != nil {
		return nil, mixtureErr(spec, err)
	}
	m.fp = m.fingerprint(opt.Order.Seed)
	return m, nil
}

// name returns the mixture file as the user named it.
func (spec *Mixture) name() string {
	if spec.Name != "" {
		return spec.Name
	}
	return spec.File
}

// mixtureErr returns a refusal of the mixture spec (shuffle.ErrMixture: its message says
// why) as a usage error naming the file, and any other error as it is.
func mixtureErr(spec *Mixture, err error) error {
	if !errors.Is(err, shuffle.ErrMixture) {
		return err
	}
	return Usagef("%s: %s", spec.name(), strings.TrimPrefix(err.Error(), shuffle.ErrMixture.Error()+": "))
}

// sourceErr names source i in err, keeping its ErrUsage.
func sourceErr(spec *Mixture, i int, err error) error {
	msg := fmt.Sprintf("%s: source %d (%s): %v", spec.name(), i, spec.Sources[i].Name, err)
	if isUsage(err) {
		return Usagef("%s", msg)
	}
	return fmt.Errorf("%s: %w", msg[:len(msg)-len(err.Error())-2], err)
}

// fingerprint returns the mixture's fingerprint: what its order depends on (each source's
// data, options and rule, the epoch size and the seed).
func (m *mixPlan) fingerprint(seed uint64) string {
	type src struct {
		Fingerprint string
		Rule        string
		Value       string
		N           uint64
		Seed        uint64
		Mode        string
		Mix         int
		RecordSize  int64
		Window      []int64
	}
	doc := struct {
		Version      int
		EpochRecords uint64
		Seed         uint64
		Sources      []src
	}{1, m.spec.EpochRecords, seed, nil}
	for i, sub := range m.srcs {
		r := m.spec.Sources[i].Rule
		s := src{Fingerprint: layoutPrint(sub.ds), Rule: r.Kind.String(), Value: r.Value.RatString(), N: sub.ds.Records(),
			Seed: sub.opt.Order.Seed, Mode: sub.opt.Order.Mode.String(), Mix: max(1, sub.opt.Order.Mix), RecordSize: sub.ds.RecordSize()}
		if l, st, row, _, ok := sub.ds.Window(); ok {
			s.Window = []int64{l, st, row}
		}
		doc.Sources = append(doc.Sources, s)
	}
	b, _ := json.Marshal(doc)
	h := sha256.Sum256(b)
	return "mix-" + hex.EncodeToString(h[:16])
}

// layoutPrint returns what a source's epochs depend on beyond its manifest: the records of each
// block and where its data file lies (a file served in place: its path, offset and block size;
// windows: the rows each block covers), hashed with the manifest's fingerprint.
func layoutPrint(ds *layout.Dataset) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", ds.Manifest.Fingerprint())
	for b, n := range ds.BlockCounts() {
		e, _ := ds.Extent(layout.DataFile(b))
		fmt.Fprintf(h, "%d %d %q %d %d %d\n", b, n, e.Name, e.Offset, e.Size, len(e.Parts))
		for _, part := range e.Parts {
			fmt.Fprintf(h, " %q %d %d\n", part.Name, part.Offset, part.Size)
		}
	}
	if l, st, row, segs, ok := ds.Window(); ok {
		fmt.Fprintf(h, "window %d %d %d %d\n", l, st, row, segs)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// planMixture plans the memory of a mixture: the readahead and the budget are the mount's,
// split among the sources by the bytes each gives an epoch; each source then plans its share
// as a mount of it alone would (its window, its cache, its resident blocks), and the cache is
// the sum of the sources' caches.
func (p *Plan) planMixture() error {
	m := p.mix
	return p.planSources(m.srcs, byteShares(m.order, m.srcs), m.spec.name(), m.spec.File, m.fp, true)
}

// planSources plans the memory of a mount of several sources under one cache (a mixture's, a
// dataset's fields): the readahead and the budget are the mount's, split among the sources by
// shares (of an epoch's bytes); each source then plans its share as a mount of it alone would
// (with fit, its window too), and the cache is the sum of the sources' caches. name is the
// mount's data as the user named it, data and fp what it claims memory under.
func (p *Plan) planSources(srcs []*Plan, shares []float64, name, data, fp string, fit bool) error {
	cs := p.opt.CacheSize
	mem := sysmem.Read()
	ra, _ := p.planReadahead()
	var need int64
	for i, sub := range srcs {
		need += p.planSource(sub, int64(float64(ra)*shares[i]), cs, mem, shares[i], fit)
	}
	if p.nodes != nil {
		need = max(need, int64(cache.MinPages)*cache.DefaultPageSize)
	}
	p.readahead = ra
	if total := mem.Total(); (cs > 0 && cs < need) || (cs <= 0 && total > 0 && need > total) {
		return sourcesCacheRefusal(srcs, cs, total, need, name, p.fields != nil)
	}
	p.mem = memory.Plan{Memory: mem, Total: mem.Total(), Claimed: p.claimed(mem, data, fp)}
	p.mem.Headroom = memory.Headroom(p.mem.Total)
	p.mem.Budget, p.mem.BudgetReason = memory.Budget(cs, need, mem, p.mem.Headroom, p.mem.Claimed)
	// Each source's share of the budget: by the bytes it gives an epoch, never less than its
	// need nor (the rest going to the others) more than it can use.
	alloc := make([]int64, len(srcs))
	left, open := p.mem.Budget, 0.0
	for i, sub := range srcs {
		alloc[i] = sub.need.Need
		left -= alloc[i]
		open += shares[i]
	}
	for round := 0; round < 2 && left > 0 && open > 0; round++ {
		give, next := left, 0.0
		for i, sub := range srcs {
			room := max(0, max(sub.need.Need, memory.Footprint(sub.ds, cache.DefaultPageSize))-alloc[i])
			if room == 0 {
				continue
			}
			k := min(room, int64(float64(give)*shares[i]/open))
			alloc[i] += k
			left -= k
			if k < room {
				next += shares[i]
			}
		}
		open = next
	}
	p.cacheOpt = cache.Options{}
	var whole bool
	for i, sub := range srcs {
		sub.mem = memory.PlanFor(sub.ds, cache.DefaultPageSize, alloc[i], sub.need.Need, p.opt.Direct, mem, 0)
		sub.mem.BudgetReason = fmt.Sprintf("its part of the mount's budget: %.1f%% of an epoch's bytes, at least its windows and readahead, at most what it can use", 100*shares[i])
		if sub.loc.Kind == Remote {
			sub.planRemote()
			p.cacheOpt.MaxRead = max(p.cacheOpt.MaxRead, sub.cacheOpt.MaxRead)
			p.cacheOpt.Workers = max(p.cacheOpt.Workers, sub.cacheOpt.Workers)
			whole = true
		}
		p.cacheOpt.Size += sub.mem.CacheSize
		p.cacheOpt.Keep += sub.need.Need
		p.mem.Size += sub.mem.Size
		p.mem.Stored += sub.mem.Stored
		p.mem.Footprint += sub.mem.Footprint
		p.mem.Resident += sub.mem.Resident
		p.mem.Decode += sub.mem.Decode
		p.mem.Direct = p.mem.Direct || sub.mem.Direct
	}
	p.cacheOpt.Whole = whole
	p.mem.CacheSize = p.cacheOpt.Size
	p.mem.CacheReason = "the sum of the sources' caches (info.json's sources[].memory)"
	p.mem.Reason = "each source's own plan (info.json's sources[].memory)"
	p.need = memory.CacheNeed{Need: need, Readahead: ra}
	if err := p.cacheOpt.Validate(); err != nil {
		return Usagef(flag("cache-size")+": %v", err)
	}
	return nil
}

// planSource sets a source's readahead (rai, its share of the mount's), window (with fit) and
// need of the cache, and returns that need.
func (p *Plan) planSource(sub *Plan, rai, cs int64, mem sysmem.Memory, share float64, fit bool) int64 {
	if sub.loc.Kind == Remote && p.nodes == nil {
		rai = max(rai, sub.opt.S3.PartSize)
	}
	if fit {
		sub.fitWindow(cs, rai, mem, share, 0)
	}
	mix := sub.opt.Order.Mix
	if sub.byIndex {
		mix, rai = 1, 0
	}
	sub.need = memory.NeedCache(sub.ds, mix, rai, cache.DefaultPageSize)
	if p.nodes != nil {
		// A node's parts are read one record of each at a time, so the pages a read holds
		// while its reply is written are the node's (planSources counts them once), not each
		// part's; and a reader of .ids holds a page of each block of the window too.
		sub.need.Need = sub.need.Window
		if sub.ds.HasIDs() {
			sub.need.Need += int64(sub.need.Mix) * cache.DefaultPageSize
		}
	}
	sub.readahead = rai
	return sub.need.Need
}

// byteShares returns each source's share of an epoch's bytes, from its records an epoch on
// average and its average record's bytes.
func byteShares(order *shuffle.Mixture, srcs []*Plan) []float64 {
	out := make([]float64, len(srcs))
	var total float64
	for i, sub := range srcs {
		avg := float64(storedBytes(sub.ds)) / float64(max(1, sub.ds.Records()))
		out[i] = order.MeanCount(i) * max(avg, 1)
		total += out[i]
	}
	for i := range out {
		out[i] /= max(total, 1)
	}
	return out
}

// facts returns what info.json says of the mixture beyond what view.Mixture computes.
func (m *mixPlan) facts(seed uint64) map[string]any {
	me, _ := m.order.Epoch(0)
	var sources []map[string]any
	for i, sub := range m.srcs {
		s, ds := m.spec.Sources[i], sub.ds
		f := map[string]any{
			"index": i, "name": s.Name, "data": sub.loc.Abs, "fingerprint": ds.Manifest.Fingerprint(),
			"kind": string(ds.Kind()), "records": ds.Records(), "bytes": ds.Bytes(), "blocks": ds.Blocks(),
			"rule": s.Rule.Kind.String(), "value": s.Rule.Text, "records_per_epoch": me.Count(i),
			"seed": sub.opt.Order.Seed, "shuffle": sub.opt.Order.Mode.String(), "mix": max(1, sub.opt.Order.Mix),
			"order_version": sub.opt.Order.OrderVersion(), "order": sub.order, "memory": sub.mem.Facts(), "readahead": sub.readahead, "verify": sub.opt.Verify,
		}
		if ds.RecordSize() > 0 {
			f["record_size"] = ds.RecordSize()
		}
		if man := ds.Manifest; man.DType != "" {
			f["dtype"], f["shape"] = man.DType, man.Shape
			if man.Shape == nil {
				f["shape"] = []int64{}
			}
		}
		if l, st, row, segs, ok := ds.Window(); ok {
			f["window"], f["stride"], f["row_size"], f["segments"] = l, st, row, segs
		}
		if path, off, ok := ds.InPlace(); ok {
			f["in_place"], f["in_place_offset"] = path, off
		}
		if sub.disk != nil {
			f["disk_cache"], f["disk_cache_size"] = sub.disk.Dir, sub.disk.Size
		}
		sources = append(sources, f)
	}
	var epochRecords any
	if m.spec.EpochRecords > 0 {
		epochRecords = m.spec.EpochRecords
	}
	return map[string]any{
		"dataset": m.spec.File, "fingerprint": m.fp, "seed": seed, "sources": sources,
		"mixture": map[string]any{"file": m.spec.File, "fingerprint": m.fp, "epoch_records": epochRecords},
	}
}

// sourcesCacheRefusal is the refusal of a mount of several sources under one cache (a
// mixture's datasets, a dataset's fields, a node's parts) whose need passes room: cs, the
// --cache-size given, or (cs 0) the memory, total. Its advice is what can work: the least
// the sources need whatever --mix and --readahead (each a block of its window in whole pages,
// and never less than cache.MinPages pages: 4 MiB a source) is named, and lowering --mix or
// --readahead is offered only when the need is above it; below it, fewer sources (for fields,
// pack fewer columns).
func sourcesCacheRefusal(srcs []*Plan, cs, total, need int64, name string, fields bool) error {
	floor := int64(cache.MinPages) * cache.DefaultPageSize
	var least int64
	for _, sub := range srcs {
		least += max(memory.NeedCache(sub.ds, 1, 0, cache.DefaultPageSize).Window, floor)
	}
	what, fewer := fmt.Sprintf("its %d sources", len(srcs)), "mount fewer sources"
	if fields {
		what, fewer = fmt.Sprintf("its %d fields", len(srcs)), "pack fewer fields (blockfs pack "+flag("columns")+")"
	}
	room, raise := flag("cache-size")+" "+ibytes(cs)+" is too small", "raise "+flag("cache-size")
	if cs <= 0 {
		room, raise = fmt.Sprintf("the memory (%s) is too small", ibytes(total)), "mount it on a machine with more memory"
	}
	atLeast := fmt.Sprintf("at least %s whatever "+flag("mix")+" and "+flag("readahead")+" (%s pages of %s a source, or a block of its window in whole pages where that is more)",
		ibytes(least), fmt.Sprint(cache.MinPages), ibytes(cache.DefaultPageSize))
	if (cs > 0 && cs >= least) || (cs <= 0 && total >= least) {
		return Usagef("%s for %s: %s' windows and readahead need %s (%s); lower "+flag("readahead")+" or "+flag("mix")+", %s, or %s",
			room, name, what, ibytes(need), atLeast, raise, fewer)
	}
	return Usagef("%s for %s: %s need %s; %s, or %s", room, name, what, atLeast, raise, fewer)
}
