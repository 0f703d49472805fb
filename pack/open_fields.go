package pack

import (
	"fmt"

	"github.com/blockfs/blockfs/internal/optname"
)

// FieldOptions are what opening an input with fields takes beyond its paths.
type FieldOptions struct {
	Columns     []string // Parquet and Arrow: only these columns, in this order; nil: all
	FillMissing bool     // WebDataset: a sample missing a field gets an empty value, not an error
	// Own, with OwnDecided, names the fields cut at blocks of their own, decided before the
	// pack (a pack in parts: decideOwn); otherwise PackFields decides at its first cut.
	Own        []string
	OwnDecided bool
}

// OpenSamples opens the inputs of a format with fields (FieldInputs' paths).
func OpenSamples(format Format, paths []string, opt FieldOptions) (SampleReader, error) {
	if len(opt.Columns) > 0 && format != Parquet && format != Arrow {
		return nil, fmt.Errorf("%s is for Parquet and Arrow inputs", optname.Flag("columns"))
	}
	if opt.FillMissing && format != WebDataset {
		return nil, fmt.Errorf("%s is for WebDataset inputs", optname.Flag("fill-missing"))
	}
	switch format {
	case TFRecord:
		return OpenTFRecord(paths)
	case WebDataset:
		return OpenWebDataset(paths, opt.FillMissing)
	case Parquet, Arrow:
		return openTable(format, paths, opt.Columns)
	}
	return nil, fmt.Errorf("%s is not a format with fields", format)
}
