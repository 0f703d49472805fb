package mount

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/blockfs/blockfs/source/objstore"
	"github.com/blockfs/blockfs/source/stores"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/source/diskcache"
	"github.com/blockfs/blockfs/view"
)

// A dataset with fields (docs/FORMAT.md, "Datasets with fields") is mounted as several sources
// under one cache, one per field, with one order: the order the largest field would have alone
// (its automatic window), given to every field. The fields have the same blocks, so each reads
// its own block files in the same order; a field cut at blocks of its own (a label) is read by
// its samples' storage indices, and planned to stay whole in the cache when it fits.

// fieldsPlan is the part of a Plan that a dataset with fields adds.
type fieldsPlan struct {
	dir  string // the dataset's directory, absolute
	man  *layout.FieldsManifest
	srcs []*Plan // by field
	big  int     // the largest field cut at the samples: its order is every field's
	fp   string
}

// RemoteFields returns the fields manifest of the dataset in an object store at url, or nil
// when the prefix holds none (a plain dataset, or nothing: its opening says which).
func RemoteFields(url string, s3opt objstore.Options) (*layout.FieldsManifest, error) {
	if err := s3opt.Validate(); err != nil {
		return nil, Usagef("%v", err)
	}
	st, err := stores.Open(url, s3opt)
	if err != nil {
		return nil, Usagef("%v", err)
	}
	// A plain dataset first: its manifest's errors (no access, no bucket) are the ones to
	// report, by the plain dataset's opening.
	if plain, err := st.Exists(objstore.ManifestName); plain || err != nil {
		return nil, nil
	}
	raw, err := st.ReadFile(objstore.FieldsManifestName, layout.MaxFieldsManifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return layout.ParseFieldsManifest(st.Path(objstore.FieldsManifestName), raw)
}

// FieldData returns where field fl of the dataset with fields at data (a directory or an
// s3:// URL) is: a directory under it, refused if it resolves outside it (a symlinked fields/
// or fields/NAME, layout.FieldPath), or a prefix under its URL.
func FieldData(data string, fl layout.Field) (string, error) {
	loc := Locate(data)
	if loc.Kind == Remote {
		return strings.TrimSuffix(loc.Abs, "/") + "/" + fl.Dir, nil
	}
	return layout.FieldPath(loc.Abs, fl)
}

// openedField checks field i's dataset ds against the manifest (layout.FieldsManifest.CheckField):
// dss are the fields' datasets opened before it.
func openedField(man *layout.FieldsManifest, i int, ds *layout.Dataset, dss []*layout.Dataset) error {
	var anchor *layout.Dataset
	if a := man.Anchor(); a < i {
		anchor = dss[a]
	}
	return man.CheckField(i, ds, anchor)
}

// newFields checks and plans a mount of the dataset with fields at opt.Data, whose manifest is
// man (read from an object store, or shards in place sd's) or, nil, read from its directory.
func newFields(opt Options, man *layout.FieldsManifest, sd *shardsData) (*Plan, error) {
	p, err := openFields(opt, man, sd)
	if err != nil {
		return nil, err
	}
	f := p.fields
	if err := p.checkMount([]string{p.loc.Abs}, f.srcs, nil); err != nil {
		return nil, err
	}
	if err := p.planFields(); err != nil {
		return nil, err
	}
	for i, sub := range f.srcs {
		if err := sub.finish(); err != nil {
			return nil, fmt.Errorf("%s: field %q: %w", opt.Data, f.man.Fields[i].Name, err)
		}
	}
	return p, nil
}

// openFields opens each field of the dataset with fields at opt.Data (man, or read from its
// directory when nil) as a source of its own, each in the order ChooseOrder gives it, and
// finds the largest (fieldsPlan.big). With a disk cache, each field's is a directory of its
// own under it, with its part of the bound.
func openFields(opt Options, man *layout.FieldsManifest, sd *shardsData) (*Plan, error) {
	loc := Locate(opt.Data)
	if opt.InPlace.given() {
		return nil, Usagef("%s is a dataset with fields: %s do not apply to it (its samples are served as pack stored them)", opt.Data, inPlaceFlagList)
	}
	var dss []*layout.Dataset // shards in place: the fields' datasets
	switch {
	case sd != nil:
		dss = sd.dss
		loc = Location{Kind: FieldsDir, Name: opt.Data, Abs: sd.index}
	case man == nil:
		var err error
		if man, err = layout.ReadFieldsManifest(loc.Abs); err != nil {
			return nil, err
		}
	}
	p := &Plan{opt: opt, loc: loc}
	if sd != nil {
		p.autoIndex = sd.autoIndex()
	}
	f := &fieldsPlan{dir: loc.Abs, man: man}
	p.fields = f
	for i, fl := range man.Fields {
		so := opt
		var err error
		if dss == nil {
			if so.Data, err = FieldData(opt.Data, fl); err != nil {
				return nil, err
			}
		}
		if opt.DiskCache != "" {
			// Each field's block files in a directory of their own (a disk cache is one
			// dataset's).
			so.DiskCache = filepath.Join(opt.DiskCache, filepath.FromSlash(fl.Dir))
		}
		var sub *Plan
		if dss != nil {
			so.Data = loc.Abs
			sub, err = shardsField(so, fl, dss[i], sd.kind)
		} else {
			sub, err = openSource(so)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: field %q: %w", opt.Data, fl.Name, err)
		}
		if err := openedField(man, i, sub.ds, f.datasets()); err != nil {
			return nil, err
		}
		sub.byIndex = fl.Own()
		f.srcs = append(f.srcs, sub)
	}
	if opt.DiskCache != "" {
		splitDiskCache(f.srcs, opt)
	}
	f.big = largestField(man, f.datasets())
	return p, nil
}

// inPlaceFlagList names the options of a file in place, which a dataset with fields refuses.
var inPlaceFlagList = strings.Join([]string{optname.Flag("record-size"), optname.Flag("block-size"), optname.Flag("offset"),
	optname.Flag("records"), optname.Flag("dtype"), optname.Flag("shape"), optname.Flag("window"), optname.Flag("stride")}, ", ") +
	" and " + optname.Flag("segments")

// planFields plans the memory of a mount of a dataset with fields: one order for every field,
// the largest field's, its window fitted to its share of the memory (every field's window is
// as many blocks), and the fields' shares of the cache by their stored bytes.
func (p *Plan) planFields() error {
	f, opt := p.fields, p.opt
	shares := make([]float64, len(f.srcs))
	var total float64
	for i, sub := range f.srcs {
		shares[i] = float64(max(1, storedBytes(sub.ds)))
		total += shares[i]
	}
	for i := range shares {
		shares[i] /= total
	}
	ra, _ := p.planReadahead()
	fitRA := opt.Readahead == AutoReadahead && opt.CacheSize > 0
	if fitRA {
		// A readahead the user did not ask for takes at most a quarter of the --cache-size
		// they gave, so that the automatic window has the rest of fitWindow's half of it
		// (a large --cache-size keeps the readahead, and the window, it had).
		ra = min(ra, opt.CacheSize/4)
	}
	var perBlock int64 // a block of the window, in every field cut at the samples
	for i, sub := range f.srcs {
		if !f.man.Fields[i].Own() {
			perBlock += memory.NeedCache(sub.ds, 1, 0, cache.DefaultPageSize).InCache
		}
	}
	mem := sysmem.Read()
	f.boundVariable()
	f.srcs[f.big].fitWindow(opt.CacheSize, ra, mem, 1, perBlock)
	f.shareOrder(p)
	f.fp = f.fingerprint()
	if fitRA {
		// planSources takes it from here, as a mount of a node's parts does.
		p.opt.Readahead = p.fitFieldsReadahead(shares, ra, mem)
	}
	return p.planSources(f.srcs, shares, opt.Data, p.loc.Abs, f.fp, false)
}

// fitFieldsReadahead lowers a readahead the user did not ask for, ra, as a plain dataset's is
// (planCache): it leaves at least half of the --cache-size they gave, beside what the fields'
// windows take, to blocks already fetched. What the readahead costs is what it adds to the
// fields' needs (planSource: each field its share of it, a field cut at blocks of its own
// none; a field's need is never less than cache.MinPages pages, which take some of it for
// nothing); the readahead kept is the largest whose cost is within that half, found by
// bisection since the cost only grows with it.
func (p *Plan) fitFieldsReadahead(shares []float64, ra int64, mem sysmem.Memory) int64 {
	cs := p.opt.CacheSize
	need := func(ra int64) int64 {
		var n int64
		for i, sub := range p.fields.srcs {
			n += p.planSource(sub, int64(float64(ra)*shares[i]), cs, mem, shares[i], false)
		}
		return n
	}
	windows := need(0)
	room := max(0, (cs-windows)/2)
	if need(ra)-windows <= room {
		return ra
	}
	lo, hi := int64(0), ra // need(lo) fits, need(hi) does not
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; need(mid)-windows <= room {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// boundVariable keeps the shared automatic window within autoWindowRecords records where a
// field cut at the samples has records of variable length: each record of such a field's
// window takes 16 bytes of its byte layout, whatever the order version (the largest field's
// own choice may be of fixed-size records, which version 2 does not bound).
func (f *fieldsPlan) boundVariable() {
	big := f.srcs[f.big]
	if !big.order.Auto || !big.order.InOrder {
		return
	}
	for i, sub := range f.srcs {
		if f.man.Fields[i].Own() || sub.ds.RecordSize() > 0 {
			continue
		}
		if k := recordBoundMix(big.ds); k < big.opt.Order.Mix {
			big.order.lower(big.ds, &big.opt.Order, k, fmt.Sprintf("field %s has records of variable length, whose window takes 16 bytes a record", f.man.Fields[i].Name))
		}
		return
	}
}

// shareOrder gives every field, and p, the largest field's order.
func (f *fieldsPlan) shareOrder(p *Plan) {
	big := f.srcs[f.big]
	for _, sub := range f.srcs {
		sub.opt.Order, sub.order = big.opt.Order, big.order
	}
	p.order = big.order
	p.opt.Order = big.opt.Order
}

// largestField returns the index of the field cut at the samples with the most stored bytes:
// its order is the one every field is served in.
func largestField(man *layout.FieldsManifest, dss []*layout.Dataset) int {
	largest := man.Anchor()
	for i, ds := range dss {
		if !man.Fields[i].Own() && storedBytes(ds) > storedBytes(dss[largest]) {
			largest = i
		}
	}
	return largest
}

// splitDiskCache gives each field's disk cache (in DIR/fields/NAME) its part of one bound, by
// its files' bytes: --disk-cache-size, or (auto) what the filesystem has free plus what the
// fields' caches hold already, at most the dataset.
func splitDiskCache(srcs []*Plan, opt Options) {
	files := make([]int64, len(srcs))
	var total int64
	for i, sub := range srcs {
		files[i] = memory.StoredBytes(sub.ds) // the disk cache keeps the files as stored
		total += files[i]
	}
	bound := opt.DiskCacheSize
	if bound == 0 {
		room := diskcache.Free(opt.DiskCache)
		for _, sub := range srcs {
			room += diskcache.Cached(sub.opt.DiskCache)
		}
		bound = min(total, room)
	}
	for i, sub := range srcs {
		sub.opt.DiskCacheSize = max(1, int64(float64(bound)*float64(files[i])/float64(max(total, 1))))
	}
}

// datasets returns the fields' datasets opened so far, by field.
func (f *fieldsPlan) datasets() []*layout.Dataset {
	out := make([]*layout.Dataset, len(f.srcs))
	for i, sub := range f.srcs {
		out[i] = sub.ds
	}
	return out
}

// own returns, by field, whether it is cut at blocks of its own.
func (f *fieldsPlan) own() []bool {
	out := make([]bool, len(f.man.Fields))
	for i := range f.man.Fields {
		out[i] = f.man.Fields[i].Own()
	}
	return out
}

// fingerprint returns the dataset's fingerprint: its fields' and their order.
func (f *fieldsPlan) fingerprint() string {
	h := sha256.New()
	for i, sub := range f.srcs {
		fmt.Fprintf(h, "%s %s\n", f.man.Fields[i].Name, sub.ds.Manifest.Fingerprint())
	}
	return "fields-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// names returns the fields' names, by field.
func (f *fieldsPlan) names() []string {
	out := make([]string, len(f.man.Fields))
	for i, fl := range f.man.Fields {
		out[i] = fl.Name
	}
	return out
}

// facts returns what info.json says of the dataset beyond what view.Fields computes.
func (f *fieldsPlan) facts() map[string]any {
	var fields []map[string]any
	for i, fl := range f.man.Fields {
		sub := f.srcs[i]
		m := map[string]any{
			"name": fl.Name, "kind": string(fl.Kind), "file": "." + fl.Name, "bytes": sub.ds.Bytes(),
			"dtype": fl.DType, "shape": fl.Shape, "memory": sub.mem.Facts(),
		}
		if fl.Shape == nil {
			m["shape"] = []int64{}
		}
		if fl.Own() {
			m["blocks"] = layout.OwnBlocks
		}
		if fl.Kind == layout.Fixed {
			m["record_size"] = fl.RecordSize
		} else {
			m["offsets"] = "." + fl.Name + view.OffsetsSuffix
		}
		fields = append(fields, m)
	}
	return map[string]any{"dataset": f.dir, "fingerprint": f.fp, "fields": fields, "source_input": f.man.Source}
}
