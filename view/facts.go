package view

import (
	"errors"
	"path/filepath"
	"syscall"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source"
)

// What a server of a Set (package fs) needs to know about its dataset, so that it need not
// reach through view into the packages below.

// Variable reports whether records vary in length: epochs then have an Offsets file.
func (s *Set) Variable() bool { return s.DS.Kind() == layout.Variable }

// Dir returns the dataset's directory (a mount's fsname).
func (s *Set) Dir() string { return s.DS.Dir }

// Stamp returns the file whose modification time is the dataset's: its manifest, or the file
// served in place.
func (s *Set) Stamp() string {
	if s.DS.Flat() {
		return s.DS.Manifest.Source
	}
	return filepath.Join(s.DS.Dir, "blockfs.json")
}

// OpenNames returns the dataset's names file (one source name per line, in source id order),
// read through the cache, or false if the dataset has none.
func (s *Set) OpenNames() (File, bool) { return OpenNames(s.DS, s.Cache) }

// Facts returns what a mount's .blockfs/info.json says of the dataset, its order and the
// tree's names: enough for a reader to configure itself.
func (s *Set) Facts() map[string]any { return DatasetFacts(s.DS, s.Opt) }

// DatasetFacts returns what info.json says of dataset ds served in order opt (Set.Facts).
func DatasetFacts(ds *layout.Dataset, opt shuffle.Options) map[string]any {
	man := ds.Manifest
	f := map[string]any{
		"dataset":        ds.Dir,
		"kind":           string(ds.Kind()),
		"records":        ds.Records(),
		"bytes":          ds.Bytes(),
		"blocks":         ds.Blocks(),
		"seed":           opt.Seed,
		"shuffle":        opt.Mode.String(),
		"mix":            max(1, opt.Mix),
		"order_version":  opt.OrderVersion(),
		"ids":            "uint64 little-endian source index per record (epoch-NNNN.ids)",
		"ids_dtype":      "<u8",
		"preshuffled":    man.PreShuffle.Shuffled,
		"format_version": man.Version,
		"fingerprint":    man.Fingerprint(),
		"tree":           Tree(),
	}
	if ds.RecordSize() > 0 {
		f["record_size"] = ds.RecordSize()
	}
	if c, stored, raw := ds.Compression(); c != nil {
		f["compression"] = map[string]any{"codec": c.Codec, "level": c.Level, "frame": c.Frame,
			"stored_bytes": stored, "bytes": raw, "ratio": float64(stored) / float64(max(raw, 1))}
	}
	if ds.Kind() == layout.Variable {
		f["offsets_dtype"] = "<u8"
	}
	if man.DType != "" {
		f["dtype"] = man.DType
		f["shape"] = man.Shape
		if man.Shape == nil {
			f["shape"] = []int64{}
		}
	}
	if man.Names != nil {
		f["names"] = ".blockfs/names.txt: the source name of each record, one per line, in id order"
	}
	if l, st, row, segs, ok := ds.Window(); ok {
		f["window"], f["stride"], f["row_size"], f["segments"] = l, st, row, segs
		f["windows"] = ds.Records()
		f["ids"] = "uint64 little-endian start row of each window (epoch-NNNN.ids)"
	}
	if path, off, ok := ds.InPlace(); ok {
		f["in_place"] = path
		f["in_place_offset"] = off
	}
	return f
}

// Corrupt reports whether err says the dataset is corrupt: a bad checksum, a file shorter
// than the manifest says, a path outside the dataset.
func Corrupt(err error) bool {
	return errors.Is(err, layout.ErrCorrupt) || errors.Is(err, layout.ErrUnsafePath) ||
		errors.Is(err, source.ErrShort) || errors.Is(err, source.ErrCorrupt)
}

// Gone reports whether err says a dataset file is missing (ENOENT from a source), as opposed
// to a name that does not resolve.
func Gone(err error) bool {
	var se *source.Error
	return errors.As(err, &se) && errors.Is(err, syscall.ENOENT)
}
