package mount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/blockfs/blockfs/source/objstore"
	"github.com/blockfs/blockfs/source/stores"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source/local"
	"github.com/dustin/go-humanize"
)

// ErrUsage marks an error in what the caller asked for (a flag out of range, flags that do not
// go together), as opposed to a failure of the data or the machine: the command line exits 2
// on it.
var ErrUsage = errors.New("usage")

// usageError is an error in the caller's options; it wraps ErrUsage.
type usageError struct{ error }

func (e usageError) Unwrap() []error { return []error{e.error, ErrUsage} }

// Usagef returns an error wrapping ErrUsage with the message format gives.
func Usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Kind is what a dataset location names.
type Kind int

const (
	Dir    Kind = iota // a dataset directory made by blockfs pack
	File               // an existing file served in place
	Remote             // a packed dataset in a store (s3://, gs://, az://, https://: stores.IsURL)
	// MixtureFile is a mixture of datasets: a .json file holding an object with "sources"
	// (IsMixture; docs/SHUFFLE.md, "Mixtures").
	MixtureFile
	// FieldsDir is a dataset with fields: a directory holding layout.FieldsManifestName.
	FieldsDir
	// ShardsIndex is an index of shards served in place (blockfs index): a directory
	// holding layout.IndexName.
	ShardsIndex
	// Shards are WebDataset or TFRecord shards served in place: a folder of nothing but
	// .tar or .tfrecord files, or a glob of them (an s3:// prefix of them is Remote).
	Shards
)

// Location is where a dataset is, as a user names it: the one place that tells a directory, a
// file served in place and an object store URL apart.
type Location struct {
	Kind Kind
	Name string // the path as given, or the URL
	Abs  string // the path made absolute, or the URL as it is (info.json's open_data)
}

// Locate returns the location data names. A path that does not exist is a Dir: opening it
// then says what is missing (a file, when flags of a file in place are given: missing).
func Locate(data string) Location {
	if stores.IsURL(data) {
		return Location{Kind: Remote, Name: data, Abs: data}
	}
	l := Location{Kind: Dir, Name: data, Abs: data}
	if abs, err := filepath.Abs(data); err == nil {
		l.Abs = abs
	}
	switch {
	case layout.IsFields(data):
		l.Kind = FieldsDir
	case layout.IsShardsIndex(data):
		l.Kind = ShardsIndex
	case IsShards(data):
		l.Kind = Shards
	}
	if st, err := os.Stat(data); err == nil && !st.IsDir() {
		l.Kind = File
		if IsMixture(data) {
			l.Kind = MixtureFile
		}
	}
	return l
}

// maxMixtureFile bounds a mixture file's size.
const maxMixtureFile = 4 << 20

// IsMixture reports whether path names a mixture file: a regular file named *.json that
// holds a JSON object (its first character other than white space is '{'), well formed or not,
// so that a mistake in a mixture is reported as one. Any other file is data (served in place).
func IsMixture(path string) bool {
	if !strings.EqualFold(filepath.Ext(path), ".json") {
		return false
	}
	f, _, err := userfile.Open(path, maxMixtureFile)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := f.Read(head)
	trimmed := strings.TrimLeft(string(head[:n]), " \t\r\n\ufeff")
	return strings.HasPrefix(trimmed, "{")
}

// fileExists reports whether path is a regular file.
func fileExists(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode().IsRegular()
}

// isUsage reports whether err is an error in the caller's options.
func isUsage(err error) bool { return errors.Is(err, ErrUsage) }

// given reports whether any flag of a file in place is set.
func (in InPlace) given() bool {
	return in.RecordSize != 0 || in.BlockSize != 0 || in.Offset != 0 || in.Records != 0 || in.DType != "" ||
		in.Shape != nil || in.Window != 0 || (in.Stride != 0 && in.Stride != 1) || in.Segments != ""
}

// IsRemote reports whether data names a dataset in an object store.
func IsRemote(data string) bool { return Locate(data).Kind == Remote }

// InPlace describes how to serve a file in place and windows over rows: mount's
// --record-size, --block-size, --offset, --records, --window, --stride and --segments.
// Zero fields are unset.
type InPlace struct {
	RecordSize int64   // bytes per record of a raw file
	BlockSize  int64   // logical block size; 0: layout.AutoBlockSize of the data
	Offset     int64   // where a raw file's records start
	Records    int64   // records of a raw file from Offset; 0: the rest of the file
	DType      string  // numpy dtype of a record's elements (a raw file; a .npy gives its own)
	Shape      []int64 // shape of a record, with DType; nil: one element
	Window     int64   // rows per window; 0: no windows
	Stride     int64   // rows between window starts; default 1
	Segments   string  // a JSON index_map or a .npy of segment start rows
}

// OpenDataset opens the dataset at l: a packed directory (windows over it with in.Window), a
// file in place, or a packed dataset in an object store (opened with s3opt). Flags that do not
// apply to the location are refused with a message naming them.
func OpenDataset(l Location, in InPlace, s3opt objstore.Options) (*layout.Dataset, error) {
	if in.Stride == 0 {
		in.Stride = 1
	}
	if in.BlockSize != 0 && in.BlockSize < layout.MinBlockSize {
		return nil, Usagef("%s", blockSizeFloor(in.BlockSize))
	}
	flat := []given{{optname.Flag("record-size"), in.RecordSize != 0}, {optname.Flag("offset"), in.Offset != 0},
		{optname.Flag("records"), in.Records != 0}, {optname.Flag("dtype"), in.DType != ""}, {optname.Flag("shape"), in.Shape != nil}}
	switch l.Kind {
	case Remote:
		for _, fl := range append(flat, given{optname.Flag("window"), in.Window != 0}, given{optname.Flag("segments"), in.Segments != ""}) {
			if fl.set {
				return nil, Usagef("%s is for a local file served in place; %s is a packed dataset in an object store", fl.name, l.Name)
			}
		}
		st, err := stores.Open(l.Name, s3opt)
		if err != nil {
			return nil, Usagef("%v", err)
		}
		return layout.OpenStore(st)
	case Dir:
		for i, fl := range flat {
			if !fl.set {
				continue
			}
			if err := missing(l.Name, fl.name+" serves an existing file in place"); err != nil {
				return nil, err
			}
			if i < 3 { // --dtype and --shape type a pack's raw records (Typed)
				return nil, Usagef("%s is for a file served in place; %s is a dataset directory", fl.name, l.Name)
			}
		}
		if in.Window != 0 {
			if err := missing(l.Name, optname.Flag("window")+" reads an existing file (.npy, raw) or dataset directory"); err != nil {
				return nil, err
			}
		}
		ds, err := local.Open(l.Name)
		if err != nil {
			return nil, err
		}
		if ds, err = ds.Typed(in.DType, in.Shape); err != nil {
			return nil, err
		}
		return in.windowed(ds)
	}
	if strings.EqualFold(filepath.Ext(l.Name), ".json") && in.RecordSize == 0 && in.DType == "" {
		return nil, Usagef("%s is served as a raw file, which needs %s; if it is meant as a mixture of datasets, it must hold a JSON object with \"sources\" (docs/SHUFFLE.md, \"Mixtures\")", l.Name, optname.Flag("record-size"))
	}
	ds, err := layout.OpenFlat(l.Name, layout.FlatOptions{RecordSize: in.RecordSize, BlockSize: in.BlockSize, Offset: in.Offset, Records: in.Records,
		DType: in.DType, Shape: in.Shape})
	if err != nil {
		return nil, err
	}
	return in.windowed(ds)
}

// blockSizeFloor says why a --block-size below layout.MinBlockSize is refused.
func blockSizeFloor(bs int64) string {
	return fmt.Sprintf("%s %s is below the least of %s: smaller blocks only add state (about 40 bytes each) and disk reads, and each still takes a page of the cache; leave it out (auto: 1 MiB) or give at least %s",
		optname.Flag("block-size"), sizeWords(bs), ibytes(layout.MinBlockSize), ibytes(layout.MinBlockSize))
}

// sizeWords prints a size as a user typed it: bytes when small, else binary units.
func sizeWords(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return ibytes(n)
}

// given is a flag and whether the caller set it.
type given struct {
	name string
	set  bool
}

// windowed applies Window, Stride and Segments to ds (rows), or returns it as it is.
func (in InPlace) windowed(ds *layout.Dataset) (*layout.Dataset, error) {
	if in.Window == 0 {
		if in.Stride != 1 || in.Segments != "" {
			return nil, Usagef("%s and %s go with %s", optname.Flag("stride"), optname.Flag("segments"), optname.Flag("window"))
		}
		return ds, nil
	}
	opt := layout.WindowOptions{Length: in.Window, Stride: in.Stride}
	if in.Segments == "" && ds.Dir != "" {
		// A pack made with --segments-by keeps its segments beside its blocks: windows never
		// cross them unless --segments names others.
		if p := filepath.Join(ds.Dir, layout.SegmentsName); fileExists(p) {
			in.Segments = p
		}
	}
	if in.Segments != "" {
		var err error
		if opt.Segments, err = layout.ReadSegments(in.Segments, int64(ds.Records())); err != nil {
			return nil, err
		}
	}
	return layout.Windows(ds, opt, in.BlockSize)
}

// ibytes says n bytes in binary units ("1.5 GiB").
func ibytes(n int64) string { return humanize.IBytes(uint64(n)) }
