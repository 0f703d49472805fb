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
// files) whose samples have one field: each part is the plain dataset PackFields makes of one
// field, in input order (no pre-shuffle, no ids), and the merge is that of parts packed with
// --no-shuffle. Inputs of several fields are refused: the parts' datasets with fields cannot
// be merged over their blocks yet (a field's manifest names blocks inside its own folder).

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
// dataset of their one field.
func packFieldShare(ctx context.Context, files []inputFile, dst string, opt Options, res *Result) (*Result, error) {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.path
	}
	r, err := OpenSamples(opt.Format, paths, opt.Fields)
	if err != nil {
		return nil, err
	}
	if specs := r.Fields(); len(specs) != 1 {
		r.Close()
		return nil, fmt.Errorf("%s holds samples of %d fields; %s packs inputs of one field only (a TFRecord file, one column with %s): pack it whole",
			paths[0], len(specs), optname.Flag("part"), optname.Flag("columns"))
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
