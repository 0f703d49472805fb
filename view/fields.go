package view

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
)

// Fields serves a dataset with fields (docs/FORMAT.md, "Datasets with fields"): one Set per
// field, each over its own namespace of one cache, all with the same blocks and the same order
// options, so they have one order. Each field is a file of its own (epoch-NNNN.<name>, and
// epoch-NNNN.<name>.offsets when its values vary in length), read through its field's Set: a
// reader of one field reads only that field's block files. A field cut at blocks of its own
// (fixed, small: a label) is read by its samples' storage indices, in the order of the anchor:
// the first field cut at the samples. Safe for concurrent use.
type Fields struct {
	// Immutable after NewFields.
	group  // the fields' Sets and their cache; the dataset's directory; the mount's facts
	Names  []string
	Own    []bool // by field: cut at blocks of its own
	anchor int
	kinds  []Kind
	// Ahead is each field's readahead, in its own bytes (its share of the mount's, as the
	// memory was planned); nil: the mount's for every field.
	Ahead []int64
}

// fieldKinds is where the Kinds of fields start: field f's values are fieldKinds+2f, its
// offsets fieldKinds+2f+1.
const fieldKinds Kind = 16

// FieldKind returns the Kind of field f's values (offsets false) or offsets.
func FieldKind(f int, offsets bool) Kind {
	k := fieldKinds + 2*Kind(f)
	if offsets {
		k++
	}
	return k
}

// Field returns the field a Kind serves and whether it is its offsets; ok is false for the
// other Kinds.
func (k Kind) Field() (f int, offsets, ok bool) {
	if k < fieldKinds {
		return 0, false, false
	}
	return int(k-fieldKinds) / 2, (k-fieldKinds)%2 == 1, true
}

// Stat returns the Kind a file of kind k counts as in a mount's counters: a field's values as
// Data, its offsets as Offsets.
func (k Kind) Stat() Kind {
	if _, off, ok := k.Field(); ok {
		if off {
			return Offsets
		}
		return Data
	}
	return k
}

// NewFields returns the fields sets (field f is sets[f], named names[f], cut at blocks of its
// own when own[f]) under cache c. dir is the dataset's directory; facts what info.json says of
// it beyond what Fields computes.
func NewFields(sets []*Set, names []string, own []bool, c *cache.Cache, dir string, facts map[string]any) (*Fields, error) {
	if len(sets) == 0 || len(sets) != len(names) || len(own) != len(sets) {
		return nil, fmt.Errorf("view: %d fields named %d times", len(sets), len(names))
	}
	f := &Fields{group: group{Sets: sets, Cache: c, dir: dir, facts: facts}, Names: names, Own: own, anchor: -1, kinds: []Kind{IDs}}
	for i, s := range sets {
		switch {
		case own[i] && (s.Variable() || s.DS.HasIDs()):
			return nil, fmt.Errorf("view: field %q has blocks of its own but is not fixed-size in stored order", names[i])
		case !own[i] && f.anchor < 0:
			f.anchor = i
		case !own[i] && (!slices.Equal(s.counts, sets[f.anchor].counts) || s.Opt != sets[f.anchor].Opt):
			return nil, fmt.Errorf("view: field %q is not cut at the samples field %q is, or not in its order", names[i], names[f.anchor])
		}
		if s.DS.Records() != sets[0].DS.Records() {
			return nil, fmt.Errorf("view: field %q has %d records; field %q %d", names[i], s.DS.Records(), names[0], sets[0].DS.Records())
		}
		f.kinds = append(f.kinds, FieldKind(i, false))
		if s.Variable() {
			f.kinds = append(f.kinds, FieldKind(i, true))
		}
	}
	if f.anchor < 0 {
		return nil, fmt.Errorf("view: every field has blocks of its own")
	}
	return f, nil
}

// Readahead returns a reader's readahead: for a field's file, the field's share of the
// mount's (a labels field's blocks are small, and the mount's readahead in its own bytes
// would ask for the whole epoch at once, each block in a cache page of its own).
func (f *Fields) Readahead(k Kind, mount int64) int64 {
	if i, _, ok := k.Field(); ok && i < len(f.Ahead) {
		return min(mount, max(1, f.Ahead[i]))
	}
	if k == IDs && len(f.Ahead) > 0 {
		return min(mount, max(1, f.Ahead[f.anchor]))
	}
	return mount
}

// Records returns the records of an epoch: every field's.
func (f *Fields) Records(uint64) (uint64, error) { return f.Sets[0].DS.Records(), nil }

// Kinds returns an epoch's files: its ids, then each field's values (and offsets).
func (f *Fields) Kinds() []Kind { return f.kinds }

// Suffix returns the suffix of an epoch's file of kind k: ".ids", ".NAME", ".NAME.offsets".
func (f *Fields) Suffix(k Kind) string {
	if i, off, ok := k.Field(); ok && i < len(f.Names) {
		if off {
			return "." + f.Names[i] + OffsetsSuffix
		}
		return "." + f.Names[i]
	}
	return kindSuffix[k]
}

// set returns the Set and the Kind within it of a file of kind k.
func (f *Fields) set(k Kind) (*Set, Kind, error) {
	if k == IDs {
		return f.Sets[f.anchor], IDs, nil
	}
	i, off, ok := k.Field()
	if !ok || i >= len(f.Sets) || (off && !f.Sets[i].Variable()) {
		return nil, 0, fmt.Errorf("view: no file of kind %d in a dataset with fields", k)
	}
	if off {
		return f.Sets[i], Offsets, nil
	}
	return f.Sets[i], Data, nil
}

// FileSize returns the size of the file of kind k over positions rg of epoch n.
func (f *Fields) FileSize(ctx context.Context, n uint64, k Kind, rg Range) (int64, error) {
	s, sk, err := f.set(k)
	if err != nil {
		return 0, err
	}
	return s.FileSize(ctx, n, sk, rg)
}

// Open returns the file of kind k over positions rg of epoch n.
func (f *Fields) Open(ctx context.Context, n uint64, k Kind, rg Range) (File, error) {
	s, sk, err := f.set(k)
	if err != nil {
		return nil, err
	}
	if i, _, ok := k.Field(); ok && f.Own[i] {
		e, err := f.Sets[f.anchor].Epoch(n)
		if err != nil {
			return nil, err
		}
		return &ownFile{e: e, ds: s.DS, c: s.Cache, rg: rg}, nil
	}
	return s.Open(ctx, n, sk, rg)
}

// ownFile is the values of a fixed field cut at blocks of its own over positions rg of an
// epoch of the anchor's order: each position's value is the field's record at its sample's
// storage index (the anchor's block's first record plus its index in the block).
type ownFile struct {
	e  *Epoch          // the anchor's
	ds *layout.Dataset // the field's
	c  *cache.Cache    // the field's namespace
	rg Range
}

func (f *ownFile) Size() int64 { return int64(f.rg.Len()) * f.ds.RecordSize() }

func (f *ownFile) ReadAt(p []byte, off int64) (int, error) { return readAt(f, p, off) }

func (f *ownFile) gather(rc call, g *Gather, buf []byte, off int64) (int, error) {
	n := clamp(buf, off, f.Size())
	if n == 0 {
		return 0, nil
	}
	rs := uint64(f.ds.RecordSize())
	first := uint64(off) / rs
	count := (uint64(off)+uint64(n)-1)/rs - first + 1
	raw := make([]byte, count*rs)
	// Each value is copied from the pinned cache page it is in: a read costs its values, not
	// their blocks'.
	var ps cache.Pins
	defer ps.Release()
	type pageKey struct {
		block int
		page  int64
	}
	pages := map[pageKey][]byte{}
	pgs := int64(f.c.PageSize())
	page := func(b int, p int64) ([]byte, error) {
		k := pageKey{b, p}
		if v, ok := pages[k]; ok {
			return v, nil
		}
		id := layout.DataFile(b)
		run, err := f.c.PinPage(rc.ctx, rc.waits, &ps, id, p)
		if err != nil {
			return nil, err
		}
		v := run.Append(nil, p*pgs, min(pgs, f.ds.Size(id)-p*pgs))[0]
		pages[k] = v
		return v, nil
	}
	ord := f.e.ord
	for i := uint64(0); i < count; {
		pos := f.rg.Start + first + i
		win := ord.Window(ord.WindowOf(pos))
		for j := pos - win.Start; j < win.Count && i < count; j, i = j+1, i+1 {
			b, local := win.At(j)
			fb, fl := f.ds.BlockOf(f.e.ds.FirstRecord(b) + local)
			at := int64(fl * rs)
			for k := int64(0); k < int64(rs); {
				v, err := page(fb, (at+k)/pgs)
				if err != nil {
					return 0, err
				}
				k += int64(copy(raw[int64(i*rs)+k:int64((i+1)*rs)], v[(at+k)%pgs:]))
			}
		}
	}
	copy(buf[:n], raw[uint64(off)-first*rs:])
	g.Vecs = append(g.Vecs, buf[:n])
	return n, nil
}

// Stamp returns the fields manifest.
func (f *Fields) Stamp() string { return f.dir + "/blockfs-fields.json" }

// Facts returns info.json's facts of the dataset: the mount's, with each field's names.
func (f *Fields) Facts() map[string]any {
	out := f.factsCopy()
	s := f.Sets[f.anchor]
	out["kind"] = "fields"
	out["records"] = s.DS.Records()
	out["blocks"] = s.DS.Blocks()
	out["seed"], out["shuffle"], out["mix"] = s.Opt.Seed, s.Opt.Mode.String(), max(1, s.Opt.Mix)
	out["ids"] = "uint64 little-endian source index per record (epoch-NNNN.ids)"
	out["ids_dtype"] = "<u8"
	out["offsets_dtype"] = "<u8"
	tree := Tree()
	tree["field"] = ".%s"
	tree["field_offsets"] = ".%s" + OffsetsSuffix
	out["tree"] = tree
	return out
}

// ParseEpochFileOf parses the name of an epoch's file that s serves: "epoch-NNNN" (canonical
// digits) followed by the suffix of one of s's Kinds.
func ParseEpochFileOf(s Namer, name string) (uint64, Kind, bool) {
	rest, ok := strings.CutPrefix(name, epochPrefix)
	if !ok {
		return 0, 0, false
	}
	d := 0
	for d < len(rest) && rest[d] >= '0' && rest[d] <= '9' {
		d++
	}
	n, ok := parseCanonical(rest[:d])
	if !ok || EpochName(n) != epochPrefix+rest[:d] {
		return 0, 0, false
	}
	for _, k := range s.Kinds() {
		if s.Suffix(k) == rest[d:] {
			return n, k, true
		}
	}
	return 0, 0, false
}
