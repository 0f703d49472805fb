package pack

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/blockfs/blockfs/internal/fsync"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
)

// A pack in parts of inputs whose samples have several fields (docs/FORMAT.md, "Packs in
// parts"): part I packs its share as PackFields would, then moves each field's dataset to
// OUT/fields/NAME/parts/part-I-of-N/, inside the folder of the merged dataset's field NAME, so
// that the merge writes OUT/fields/NAME/blockfs.json over the parts' blocks without copying
// them. Which fields are cut at blocks of their own is decided once for all the parts, as one
// pack of all the inputs decides it (decideOwn), so the parts agree.

// fieldPart is what a part of inputs with fields needs beyond its share, and what it made.
type fieldPart struct {
	top   string      // OUT, a local directory; "" for an object store
	store *fieldStore // OUT, an object store; nil for a local directory
	part  Part        //
	all   []inputFile // the inputs of all the parts
	m     *layout.FieldsManifest
}

// fieldPartDir is where part p puts field name's dataset, relative to OUT.
func fieldPartDir(name string, p string) string {
	return path.Join(layout.FieldDir(name), PartsDir, p)
}

// packFieldsPart packs the part's samples of several fields, r (of the inputs paths), as a
// dataset with fields at dst, then moves each field's dataset to its folder in OUT
// (fieldPartDir) and removes dst. res.Manifest summarises the part: its records, the bytes of
// all the fields and the blocks of the field cut at the samples. It closes r.
func packFieldsPart(ctx context.Context, r SampleReader, paths []string, dst string, opt Options, res *Result, fp *fieldPart) (*Result, error) {
	if fp == nil || (fp.top == "" && fp.store == nil) {
		r.Close()
		return nil, fmt.Errorf("%s holds samples of %d fields; %s packs them into a local directory or an object store only", paths[0], len(r.Fields()), optname.Flag("part"))
	}
	own, err := decideOwn(opt.Format, fp.all, opt.Fields, opt.BlockSize)
	if err != nil {
		r.Close()
		return nil, err
	}
	if fp.store != nil {
		return storeFieldsPart(ctx, r, dst, opt, res, fp, own)
	}
	opt.Fields.Own, opt.Fields.OwnDecided = own, true
	fr, err := PackFields(ctx, r, dst, opt.Format, len(paths), opt)
	if err != nil {
		return nil, err
	}
	fp.m = fr.Manifest
	if err := moveFieldParts(fp.top, dst, fp.part.Name(), fr.Manifest); err != nil {
		return nil, err
	}
	res.Manifest, err = fieldsSummary(dirOut{fp.top}, fr.Manifest, fp.part.Name())
	return res, err
}

// decideOwn returns the fields cut at blocks of their own in every part of a pack in parts of
// files: those one pack of all of them would choose at its first cut (layout.OwnFields), from
// the samples it would put in its first block. It reads the inputs' first samples, from the
// first input on, until they fill a block of block bytes; every part reads the same ones. An
// input without fixed fields (WebDataset, TFRecord) reads none, and one whose samples fill no
// block has none (one pack of it never cuts).
func decideOwn(format Format, files []inputFile, fo FieldOptions, block int64) ([]string, error) {
	if format == WebDataset || format == TFRecord { // their fields are variable
		return nil, nil
	}
	fo.Own, fo.OwnDecided = nil, false
	var fields []layout.Field
	var pending int64
	var n uint64
	for _, f := range files {
		r, err := OpenSamples(format, []string{f.path}, fo)
		if err != nil {
			return nil, err
		}
		if fields == nil {
			fields = specFields(r.Fields())
			if !hasFixed(fields) {
				r.Close()
				return nil, nil
			}
		} else if len(r.Fields()) != len(fields) {
			r.Close()
			break // the part that packs it refuses it
		}
		full, err := scanBlock(r, fields, &pending, &n, block)
		r.Close()
		if err != nil {
			return nil, err
		}
		if full {
			break
		}
	}
	if pending < block {
		return nil, nil
	}
	var own []string
	for _, k := range layout.OwnFields(fields, n) {
		own = append(own, fields[k].Name)
	}
	return own, nil
}

// scanBlock reads r's samples, adding each one's bytes in a block (its values, and a variable
// value's 8-byte offset, as layout.FieldWriter counts them) to pending and one to n, until
// pending reaches block (true) or r ends (false).
func scanBlock(r SampleReader, fields []layout.Field, pending *int64, n *uint64, block int64) (bool, error) {
	for *pending < block {
		values, err := r.Next()
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for k, v := range values {
			*pending += int64(len(v))
			if k < len(fields) && fields[k].Kind == layout.Variable {
				*pending += 8
			}
		}
		*n++
	}
	return true, nil
}

// specFields returns the layout fields of specs (their kind and element; no blocks decided).
func specFields(specs []FieldSpec) []layout.Field {
	fields := make([]layout.Field, len(specs))
	for i, s := range specs {
		kind := layout.Variable
		if s.Kind == FixedField {
			kind = layout.Fixed
		}
		fields[i] = layout.Field{Name: s.Name, Kind: kind, RecordSize: s.RecordSize, DType: s.DType, Shape: s.Shape, Dir: layout.FieldDir(s.Name)}
	}
	return fields
}

// hasFixed reports whether some field is fixed-size (could get blocks of its own).
func hasFixed(fields []layout.Field) bool {
	for _, f := range fields {
		if f.Kind == layout.Fixed {
			return true
		}
	}
	return false
}

// moveFieldParts moves each field's dataset of the dataset with fields at dst (m's) to
// top/fields/NAME/parts/part (replacing what an earlier run of the part left there), then
// removes dst, and makes the renames durable.
func moveFieldParts(top, dst, part string, m *layout.FieldsManifest) error {
	for _, fl := range m.Fields {
		to := filepath.Join(top, filepath.FromSlash(fieldPartDir(fl.Name, part)))
		if err := os.RemoveAll(to); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(dst, filepath.FromSlash(fl.Dir)), to); err != nil {
			return err
		}
		if err := fsync.Dir(filepath.Dir(to)); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return fsync.Dir(filepath.Dir(dst))
}

// fieldsSummary reads the datasets of m's fields of part (in out's fieldPartDir, or with part
// "", in the fields' own folders: a dataset with fields) and returns a manifest summarising
// them: the records, the bytes of all the fields and the blocks of the field cut at the
// samples (m.Anchor()).
func fieldsSummary(out partsOut, m *layout.FieldsManifest, part string) (*layout.Manifest, error) {
	var sum *layout.Manifest
	var bytes uint64
	for k, fl := range m.Fields {
		dir := fl.Dir
		if part != "" {
			dir = fieldPartDir(fl.Name, part)
		}
		name := path.Join(dir, layout.ManifestName)
		data, err := out.read(name)
		if err != nil {
			return nil, err
		}
		ds, err := layout.ParseManifest(out.location()+"/"+name, data)
		if err != nil {
			return nil, err
		}
		bytes += ds.Bytes
		if k == m.Anchor() {
			sum = ds
		}
	}
	sum.Bytes = bytes
	return sum, nil
}
