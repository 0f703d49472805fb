package pack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
)

// A pack in parts of inputs with fields (TFRecord files, WebDataset shards, Parquet or Arrow
// files): each part packs its share in input order (no pre-shuffle, no ids). Samples of one
// field make the plain dataset PackFields makes of it, and the merge is that of parts packed
// with --no-shuffle; samples of several fields make a dataset per field in the field's own
// folder (parts_fieldsets.go), and the merge writes each field's manifest over them.

// fieldOptionsApply refuses the options that do not apply to an input with fields.
func fieldOptionsApply(opt Options, format Format) error {
	if opt.RecordSize != 0 || opt.SkipHeader || opt.NoShuffle || len(opt.Include) > 0 || len(opt.Exclude) > 0 || opt.AllFiles {
		return fmt.Errorf("%s, %s, %s, %s, %s and %s do not apply to %s %s (its samples keep their input order; the mount shuffles them)",
			optname.Flag("record-size"), optname.Flag("skip-header"), optname.Flag("no-shuffle"), optname.Flag("include"),
			optname.Flag("exclude"), optname.Flag("all-files"), optname.Flag("format"), format)
	}
	return nil
}

// expandFieldInputs expands each input as pack expands its SRC for a format with fields
// (FieldInputs: a folder is its files of the format, sorted).
func expandFieldInputs(inputs []string, format Format) ([]string, error) {
	var out []string
	for _, in := range inputs {
		paths, err := FieldInputs(format, in)
		if err != nil {
			return nil, err
		}
		out = append(out, paths...)
	}
	return out, nil
}

// packFieldShare packs the part's share of inputs with fields, files, into dst as the plain
// dataset of their one field, or as the datasets of their several fields (packFieldsPart).
func packFieldShare(ctx context.Context, files []inputFile, dst string, opt Options, res *Result, fp *fieldPart) (*Result, error) {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.path
	}
	r, err := OpenSamples(opt.Format, paths, opt.Fields)
	if err != nil {
		return nil, err
	}
	if len(r.Fields()) != 1 {
		return packFieldsPart(ctx, r, paths, dst, opt, res, fp)
	}
	if _, err := PackFields(ctx, r, dst, opt.Format, len(paths), opt); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dst, layout.ManifestName))
	if err != nil {
		return nil, err
	}
	if res.Manifest, err = layout.ParseManifest(dst, data); err != nil {
		return nil, err
	}
	return res, nil
}
