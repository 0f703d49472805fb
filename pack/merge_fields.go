package pack

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/blockfs/blockfs/layout"
)

// The merge of parts whose samples have several fields (parts_fieldsets.go): each field's
// manifest, OUT/fields/NAME/blockfs.json, names the blocks of the parts' datasets of it in
// part order (parts/part-I-of-N/... inside the field's folder), in input order as one pack's
// are (a field stores no ids); then OUT/blockfs-fields.json, last.

// isFieldsMerge reports whether the parts hold samples of several fields (checkAgree has
// made sure that every part with records says the same).
func isFieldsMerge(parts []*mergePart) bool {
	for _, p := range parts {
		if p.pm.Records > 0 {
			return len(p.pm.Fields) > 0
		}
	}
	return false
}

// fieldsAgree refuses part p when its fields are not ref's (the first part with records):
// their names, kinds, elements and which are cut at blocks of their own.
func fieldsAgree(p, ref *mergePart) error {
	a, b := p.pm.Fields, ref.pm.Fields
	same := len(a) == len(b)
	for k := 0; same && k < len(a); k++ {
		x, y := a[k], b[k]
		same = x.Name == y.Name && x.Kind == y.Kind && x.RecordSize == y.RecordSize && x.DType == y.DType &&
			slices.Equal(x.Shape, y.Shape) && x.Dir == y.Dir && x.Blocks == y.Blocks
	}
	if same {
		return nil
	}
	return fmt.Errorf("%s is foreign: its fields are %s, but %s's are %s; pack it again with the same inputs and options", p.file, fieldsText(a), ref.file, fieldsText(b))
}

// fieldsText words a part's fields for a refusal: "jpg (variable), cls (variable)".
func fieldsText(fields []layout.Field) string {
	if len(fields) == 0 {
		return "one (a plain dataset)"
	}
	var s []string
	for _, f := range fields {
		w := string(f.Kind)
		if f.Kind == layout.Fixed {
			w = fmt.Sprintf("fixed %d B", f.RecordSize)
		}
		if f.DType != "" {
			w += fmt.Sprintf(" %s %v", f.DType, f.Shape)
		}
		if f.Own() {
			w += ", blocks of its own"
		}
		s = append(s, fmt.Sprintf("%s (%s)", f.Name, w))
	}
	return strings.Join(s, ", ")
}

// mergeFields writes the merged dataset with fields of parts: each field's manifest over the
// parts' datasets of it, then blockfs-fields.json last. The result's Manifest summarises it
// (fieldsSummary's).
func mergeFields(out partsOut, parts []*mergePart) (*MergeResult, error) {
	var filled []*mergePart
	for _, p := range parts {
		if p.pm.Records > 0 {
			filled = append(filled, p)
		}
	}
	ref := filled[0].pm
	fm := &layout.FieldsManifest{Format: layout.FieldsFormat, Version: layout.FieldsVersion, Source: ref.Source, Fields: ref.Fields}
	for _, p := range filled {
		fm.Records += p.pm.Records
	}
	ms := make([]*layout.Manifest, len(fm.Fields))
	for k, fl := range fm.Fields {
		m, err := mergeField(out, filled, fl)
		if err != nil {
			return nil, err
		}
		if err := m.Validate(out.location() + "/" + path.Join(fl.Dir, layout.ManifestName)); err != nil {
			return nil, err
		}
		ms[k] = m
	}
	if err := checkCuts(fm, ms); err != nil {
		return nil, err
	}
	beforeManifest()
	if err := unchanged(out); err != nil {
		return nil, err
	}
	// A merged dataset there before is gone before its fields' manifests change.
	if err := out.remove(layout.FieldsManifestName); err != nil {
		return nil, err
	}
	if err := out.durable(); err != nil {
		return nil, err
	}
	sum := *ms[fm.Anchor()]
	sum.Bytes = 0
	for k, fl := range fm.Fields {
		if err := out.write(path.Join(fl.Dir, layout.ManifestName), layout.ManifestJSON(ms[k])); err != nil {
			return nil, err
		}
		sum.Bytes += ms[k].Bytes
	}
	data, err := json.MarshalIndent(fm, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := out.write(layout.FieldsManifestName, append(data, '\n')); err != nil {
		return nil, err
	}
	return &MergeResult{Manifest: &sum, Fields: fm, Parts: len(parts), Empty: len(parts) - len(filled)}, nil
}

// mergeField builds field fl's manifest over the parts' datasets of it, checking each against
// its part manifest and that its files are there at their sizes.
func mergeField(out partsOut, filled []*mergePart, fl layout.Field) (*layout.Manifest, error) {
	m := &layout.Manifest{Format: layout.FormatName, Version: layout.Version, Kind: fl.Kind, RecordSize: fl.RecordSize, DType: fl.DType, Shape: fl.Shape}
	for _, p := range filled {
		dir := fieldPartDir(fl.Name, p.pm.Dataset)
		ds, err := readFieldPart(out, p, fl, dir)
		if err != nil {
			return nil, err
		}
		if m.Source == "" {
			m.Source = ds.Source
		}
		if err := joinCompression(m, ds, p.file); err != nil {
			return nil, err
		}
		prefix := path.Join(PartsDir, p.pm.Dataset)
		for _, b := range ds.Blocks {
			nb := b
			nb.File = path.Join(prefix, b.File)
			if b.OffsetsFile != "" {
				nb.OffsetsFile = path.Join(prefix, b.OffsetsFile)
			}
			m.Blocks = append(m.Blocks, nb)
			m.Bytes += b.Bytes
		}
		m.Records += ds.Records
	}
	return m, nil
}

// readFieldPart reads and checks part p's dataset of field fl, in out's folder dir.
func readFieldPart(out partsOut, p *mergePart, fl layout.Field, dir string) (*layout.Manifest, error) {
	again := fmt.Sprintf("; pack %s again", p.file)
	data, err := out.read(path.Join(dir, layout.ManifestName))
	if err != nil {
		return nil, fmt.Errorf("%s's field %q cannot be read: %v%s", p.file, fl.Name, unwrap(err), again)
	}
	ds, err := layout.ParseManifest(out.location()+"/"+path.Join(dir, layout.ManifestName), data)
	if err != nil {
		return nil, fmt.Errorf("%s's field %q does not check: %v%s", p.file, fl.Name, err, again)
	}
	switch {
	case ds.Records != p.pm.Records:
		return nil, fmt.Errorf("%s says %d records, but its field %q holds %d%s", p.file, p.pm.Records, fl.Name, ds.Records, again)
	case ds.Kind != fl.Kind || ds.RecordSize != fl.RecordSize || ds.DType != fl.DType || !slices.Equal(ds.Shape, fl.Shape):
		return nil, fmt.Errorf("%s's field %q holds other values than its manifest says%s", p.file, fl.Name, again)
	case ds.IDs || ds.PreShuffle.Shuffled:
		return nil, fmt.Errorf("%s's field %q is pre-shuffled, but a field's records are in input order%s", p.file, fl.Name, again)
	}
	for i, b := range ds.Blocks {
		if b.IDsFile != "" {
			return nil, fmt.Errorf("%s's field %q has ids%s", p.file, fl.Name, again)
		}
		size, err := out.size(path.Join(dir, b.File))
		if err == nil && size != int64(b.Stored()) {
			err = fmt.Errorf("%s is %d bytes, not %d", b.File, size, b.Stored())
		}
		if err == nil && b.OffsetsFile != "" {
			_, err = out.size(path.Join(dir, b.OffsetsFile))
		}
		if err != nil {
			return nil, fmt.Errorf("%s's field %q does not check: block %d: %v%s", p.file, fl.Name, i, unwrap(err), again)
		}
	}
	return ds, nil
}

// checkCuts refuses merged fields cut at the samples whose blocks hold other records than
// the anchor field's (each part's are cut alike, so the whole's are).
func checkCuts(fm *layout.FieldsManifest, ms []*layout.Manifest) error {
	a := fm.Anchor()
	for k, fl := range fm.Fields {
		if fl.Own() || k == a {
			continue
		}
		same := len(ms[k].Blocks) == len(ms[a].Blocks)
		for i := 0; same && i < len(ms[k].Blocks); i++ {
			same = ms[k].Blocks[i].Records == ms[a].Blocks[i].Records
		}
		if !same {
			return fmt.Errorf("field %q is not cut at the samples field %q is, in some part; pack the parts again", fl.Name, fm.Fields[a].Name)
		}
	}
	return nil
}
