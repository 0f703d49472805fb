package pack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/blockfs/blockfs/source/objstore"
	"github.com/blockfs/blockfs/source/stores"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/strictjson"
	"github.com/blockfs/blockfs/layout"
)

// MergeResult says what Merge did.
type MergeResult struct {
	// Manifest is the merged dataset's; for parts of several fields, a summary of the
	// dataset with fields (Fields): its records, the bytes of all the fields and the blocks of
	// the field cut at the samples.
	Manifest *layout.Manifest
	Fields   *layout.FieldsManifest // the merged dataset's fields; nil for a plain dataset
	Parts    int                    // the parts merged
	Empty    int                    // of which held no records (no inputs, or empty ones)
}

// mergePart is one part being merged: its manifest and, unless empty, its dataset's.
type mergePart struct {
	pm   *PartManifest
	file string           // the part's name, part-I-of-N, for errors
	ds   *layout.Manifest // nil for an empty part
}

// Merge writes the dataset of the parts in out/parts (PackPart) as out/blockfs.json, over the
// parts' blocks, without copying them: block paths point into parts/part-I-of-N/ (for samples
// of several fields, each field's manifest out/fields/NAME/blockfs.json points into its
// folder's parts/part-I-of-N/, and out/blockfs-fields.json is written last: mergeFields). A sample's
// id is its index in the inputs' order: where the parts were pre-shuffled, Merge writes their
// ids offset by the records of the parts before (out/ids/part-I/NNNNNN.ids); a pack of a folder
// gets its names (out/names.txt) in part order. The manifest is written last, atomically. It
// refuses, naming the part, a missing part, a part there twice (of different N), a foreign part
// (other inputs or options) and a part whose manifest or dataset does not check. out may hold
// a merged dataset only with force (it is replaced).
func Merge(out string, force bool) (*MergeResult, error) {
	unlock, err := lockMerge(out)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return merge(dirOut{out}, force)
}

// MergeToStore is Merge of the parts under the object store's prefix url: it reads the part
// manifests and the parts' manifests and ids from the store, and writes the ids files, the
// names and the manifest there (the manifest last), holding the prefix's lock object
// (lockStoreMerge).
func MergeToStore(ctx context.Context, url string, store objstore.Options, force bool) (*MergeResult, error) {
	st, err := stores.Open(url, store)
	if err != nil {
		return nil, openStoreError{err}
	}
	unlock, err := lockStoreMerge(ctx, st)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return merge(&storeOut{ctx: ctx, st: st}, force)
}

// merge is Merge into out.
func merge(out partsOut, force bool) (*MergeResult, error) {
	out = watch(out)
	for _, name := range []string{layout.ManifestName, layout.FieldsManifestName} {
		if _, err := out.size(name); err == nil && !force {
			return nil, fmt.Errorf("%s holds a merged dataset already; give %s to merge again", out.location(), optname.Flag("force"))
		}
	}
	parts, err := readParts(out)
	if err != nil {
		return nil, err
	}
	if err := checkAgree(parts); err != nil {
		return nil, err
	}
	if isFieldsMerge(parts) {
		return mergeFields(out, parts)
	}
	for _, p := range parts {
		if err := p.open(out); err != nil {
			return nil, err
		}
	}
	m, err := mergeManifest(out, parts)
	if err != nil {
		return nil, err
	}
	if err := m.Validate(out.location() + "/" + layout.ManifestName); err != nil {
		return nil, err
	}
	if err := out.durable(); err != nil {
		return nil, err
	}
	beforeManifest()
	if err := unchanged(out); err != nil {
		return nil, err
	}
	if err := out.write(layout.ManifestName, layout.ManifestJSON(m)); err != nil {
		return nil, err
	}
	return &MergeResult{Manifest: m, Parts: len(parts), Empty: len(parts) - countFilled(parts)}, nil
}

// beforeManifest is called by a merge once it has read the parts, just before it checks that
// none changed and writes the manifest: tests change a part there.
var beforeManifest = func() {}

// readParts reads the part manifests in out/parts and returns parts 0..N-1 in order. It refuses
// no parts, a part there twice, parts of different N and a missing part.
func readParts(out partsOut) ([]*mergePart, error) {
	ents, err := out.names(PartsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cannot list the parts in %s: %w", out.location(), unwrap(err))
	}
	slices.Sort(ents)
	byIndex := map[int]*mergePart{}
	var first *mergePart
	for _, e := range ents {
		if _, ok, err := partName(e, ".json"); !ok {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", out.location()+"/"+PartsDir, err)
		}
		p, err := readPart(out, e)
		if err != nil {
			return nil, err
		}
		if q := byIndex[p.pm.Part]; q != nil {
			return nil, fmt.Errorf("part %d is there twice: %s and %s (packs in %d and %d parts); remove the parts of the pack not wanted", p.pm.Part, q.file, p.file, q.pm.Parts, p.pm.Parts)
		}
		byIndex[p.pm.Part] = p
		if first == nil || p.pm.Part < first.pm.Part {
			first = p
		}
	}
	if first == nil {
		return nil, fmt.Errorf("no parts to merge: %s holds no part-I-of-N.json (pack %s I/N writes them)", out.location()+"/"+PartsDir, optname.Flag("part"))
	}
	n := first.pm.Parts
	parts := make([]*mergePart, n)
	for i, p := range byIndex {
		if p.pm.Parts != n {
			return nil, fmt.Errorf("%s is a part of %d parts, but %s of %d; remove the parts of the pack not wanted", p.file, p.pm.Parts, first.file, n)
		}
		parts[i] = p
	}
	for i, p := range parts {
		if p == nil {
			return nil, fmt.Errorf("part %d of %d is missing (no %s): pack it with %s %d/%d, then merge", i, n, path.Join(PartsDir, Part{i, n}.Name()+".json"), optname.Flag("part"), i, n)
		}
	}
	return parts, nil
}

// readPart reads and checks the part manifest name in out's parts.
func readPart(out partsOut, name string) (*mergePart, error) {
	data, err := out.read(path.Join(PartsDir, name))
	if err != nil {
		return nil, fmt.Errorf("cannot read part %s: %w", name, unwrap(err))
	}
	var pm PartManifest
	if err := strictjson.Decode(data, &pm); err != nil {
		return nil, fmt.Errorf("%s is not a part manifest (%v); pack the part again", name, err)
	}
	named, _, _ := partName(name, ".json") // readParts passes only valid names
	i, n := named.Index, named.Count
	switch {
	case pm.Format != PartFormat || pm.Version != PartVersion:
		return nil, fmt.Errorf("%s is not a part manifest (format %q version %d, want %q %d)", name, pm.Format, pm.Version, PartFormat, PartVersion)
	case pm.Part != i || pm.Parts != n || pm.Dataset != (Part{i, n}).Name():
		return nil, fmt.Errorf("%s says it is part %d of %d with dataset %q; pack the part again", name, pm.Part, pm.Parts, pm.Dataset)
	}
	return &mergePart{pm: &pm, file: strings.TrimSuffix(name, ".json")}, nil
}

// checkAgree refuses a foreign part: one of other inputs or options than part 0's.
func checkAgree(parts []*mergePart) error {
	ref := parts[0].pm
	var elRef *mergePart // the first part with records: its kind and shape are the others'
	for _, p := range parts {
		o, r := p.pm.Options, ref.Options
		switch {
		case p.pm.InputsDigest != ref.InputsDigest:
			return fmt.Errorf("%s is foreign: it packed other inputs than part 0 (inputs_digest %.12s, not %.12s); pack it again with the same inputs", p.file, p.pm.InputsDigest, ref.InputsDigest)
		case o.Format != r.Format || o.BlockSize != r.BlockSize || o.Seed != r.Seed || o.NoShuffle != r.NoShuffle || o.SkipHeader != r.SkipHeader || o.Compress != r.Compress ||
			!slices.Equal(o.Columns, r.Columns) || o.FillMissing != r.FillMissing:
			return fmt.Errorf("%s is foreign: its options %s are not part 0's %s; pack it again with the same options", p.file, optionsText(o), optionsText(r))
		}
		if p.pm.Records == 0 {
			continue
		}
		if elRef == nil {
			elRef = p
			continue
		}
		e := elRef.pm.Options
		if o.Kind != e.Kind || o.RecordSize != e.RecordSize || o.DType != e.DType || !slices.Equal(o.Shape, e.Shape) {
			return fmt.Errorf("%s is foreign: its records are %s, but %s's are %s", p.file, optionsText(o), elRef.file, optionsText(e))
		}
		if err := fieldsAgree(p, elRef); err != nil {
			return err
		}
	}
	if elRef == nil {
		return errors.New("no part holds records: nothing to merge")
	}
	return nil
}

// optionsText words a part's options for a refusal.
func optionsText(o PartOptions) string {
	s := fmt.Sprintf("format %s, block size %d, seed %d, no-shuffle %v", o.Format, o.BlockSize, o.Seed, o.NoShuffle)
	if o.Compress != "" {
		s += ", compress " + o.Compress
	}
	if o.Kind != "" {
		s += fmt.Sprintf(", %s records", o.Kind)
	}
	if o.RecordSize > 0 {
		s += fmt.Sprintf(" of %d bytes", o.RecordSize)
	}
	if o.DType != "" {
		s += fmt.Sprintf(" (%s %v)", o.DType, o.Shape)
	}
	if o.SkipHeader {
		s += ", skip-header"
	}
	if len(o.Columns) > 0 {
		s += fmt.Sprintf(", columns %v", o.Columns)
	}
	if o.FillMissing {
		s += ", fill-missing"
	}
	return s
}

// open reads and checks the part's dataset manifest against its part manifest, and that each
// of its files is there at its size. An empty part has none.
func (p *mergePart) open(out partsOut) error {
	if p.pm.Records == 0 {
		return nil
	}
	dir := path.Join(PartsDir, p.pm.Dataset)
	name := out.location() + "/" + path.Join(dir, layout.ManifestName)
	data, err := out.read(path.Join(dir, layout.ManifestName))
	if err != nil {
		return fmt.Errorf("%s's dataset cannot be read: %v; pack the part again", p.file, unwrap(err))
	}
	ds, err := layout.ParseManifest(name, data)
	if err != nil {
		return fmt.Errorf("%s's dataset does not check: %v; pack the part again", p.file, err)
	}
	o := p.pm.Options
	switch {
	case ds.Records != p.pm.Records:
		return fmt.Errorf("%s says %d records, but its dataset holds %d; pack the part again", p.file, p.pm.Records, ds.Records)
	case ds.Kind != o.Kind || ds.RecordSize != o.RecordSize || ds.DType != o.DType || !slices.Equal(ds.Shape, o.Shape):
		return fmt.Errorf("%s's dataset holds other records than its manifest says; pack the part again", p.file)
	case ds.IDs == o.NoShuffle || ds.PreShuffle.Shuffled == o.NoShuffle:
		return fmt.Errorf("%s's dataset is not pre-shuffled as its manifest says; pack the part again", p.file)
	case (ds.Names != nil) != (o.Format == Files):
		return fmt.Errorf("%s's dataset has names where its manifest says otherwise; pack the part again", p.file)
	}
	for i, b := range ds.Blocks {
		sizes := map[string]int64{b.File: int64(b.Stored())}
		if b.IDsFile != "" {
			sizes[b.IDsFile] = int64(8 * b.Records)
		}
		for f, want := range sizes {
			size, err := out.size(path.Join(dir, f))
			if err != nil {
				return fmt.Errorf("%s's dataset does not check: block %d: %v; pack the part again", p.file, i, unwrap(err))
			}
			if size != want {
				return fmt.Errorf("%s's dataset does not check: block %d: %s is %d bytes, not %d; pack the part again", p.file, i, f, size, want)
			}
		}
	}
	p.ds = ds
	return nil
}

// mergeManifest builds the merged dataset's manifest over the parts' blocks, writing the ids
// files (offset by the records of the parts before) and the names file it names.
func mergeManifest(out partsOut, parts []*mergePart) (*layout.Manifest, error) {
	var m *layout.Manifest
	var base uint64 // records of the parts before
	for _, p := range parts {
		if p.ds == nil {
			continue
		}
		if m == nil {
			o := p.pm.Options
			m = &layout.Manifest{Format: layout.FormatName, Version: layout.Version, Kind: p.ds.Kind,
				RecordSize: p.ds.RecordSize, DType: p.ds.DType, Shape: p.ds.Shape, IDs: !o.NoShuffle,
				PreShuffle: layout.PreShuffle{Shuffled: !o.NoShuffle, Seed: o.Seed}, Source: p.ds.Source}
		}
		if err := joinCompression(m, p.ds, p.file); err != nil {
			return nil, err
		}
		prefix := path.Join(PartsDir, p.pm.Dataset)
		for i, b := range p.ds.Blocks {
			nb := b
			nb.File = path.Join(prefix, b.File)
			if b.OffsetsFile != "" {
				nb.OffsetsFile = path.Join(prefix, b.OffsetsFile)
			}
			if b.IDsFile != "" {
				var err error
				if nb.IDsFile, nb.IDsCRC32C, err = offsetIDs(out, p, i, b, base); err != nil {
					return nil, err
				}
			}
			m.Blocks = append(m.Blocks, nb)
			m.Bytes += b.Bytes
		}
		m.Records += p.ds.Records
		base += p.ds.Records
	}
	if filled := countFilled(parts); filled > 1 {
		// Each part is pre-shuffled, the whole is not: a block is a sample of its part only.
		// Stored "in order", the mount's automatic --mix mixes windows of blocks across parts.
		m.PreShuffle.Shuffled = false
	}
	if m.Names == nil && parts[0].pm.Options.Format == Files {
		names, err := mergeNames(out, parts)
		if err != nil {
			return nil, err
		}
		m.Names = names
	}
	return m, nil
}

// countFilled returns how many parts hold records.
func countFilled(parts []*mergePart) int {
	n := 0
	for _, p := range parts {
		if p.ds != nil {
			n++
		}
	}
	return n
}
