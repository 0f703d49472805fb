package mount

import (
	"math"
	"strconv"
	"strings"

	"github.com/blockfs/blockfs/layout"
)

// inPlaceSchema are the options of a file served in place and of windows over rows (mount,
// order and info take them; a mixture's sources each their own).
var inPlaceSchema = []Option{
	{Name: "record-size", Type: Size, Default: "", Scope: PerSource, Group: GroupInPlace,
		Help: "record size, to serve a flat file of fixed-size records in place",
		set: func(o *Options, s string) (err error) {
			if o.InPlace.RecordSize, err = ParseSize("record-size", s); err == nil && o.InPlace.RecordSize == 0 {
				err = optionErr("record-size", "%s must be at least 1 byte", flag("record-size"))
			}
			return err
		}},
	{Name: "block-size", Type: Size, Default: "auto", Scope: PerSource, Group: GroupInPlace,
		Help: "logical block size of data served in place, and of windows; auto: 1 MiB (more for a file over 1 TiB, or to hold 4 windows), so the order can mix many blocks while each read stays large",
		set: func(o *Options, s string) (err error) {
			if s == "auto" {
				o.InPlace.BlockSize = 0
				return nil
			}
			if o.InPlace.BlockSize, err = ParseSize("block-size", s); err == nil && o.InPlace.BlockSize == 0 {
				err = optionErr("block-size", "%s must be at least %s (or auto)", flag("block-size"), ibytes(layout.MinBlockSize))
			}
			return err
		}},
	{Name: "offset", Type: Size, Default: "0", Scope: PerSource, Group: GroupInPlace,
		Help: "where the records start in a raw file served in place (after a header)",
		set:  func(o *Options, s string) (err error) { o.InPlace.Offset, err = ParseSize("offset", s); return err }},
	{Name: "records", Type: Uint, Default: "0", Scope: PerSource, Group: GroupInPlace,
		Help: "how many records a raw file served in place holds from " + flag("offset") + " (a trailer may follow); 0: the rest of the file",
		set: func(o *Options, s string) error {
			var n uint64
			if err := parseUint("records", s, math.MaxUint64, &n); err != nil {
				return err
			}
			if n > math.MaxInt64 {
				return optionErr("records", "%s %d is too large", flag("records"), n)
			}
			o.InPlace.Records = int64(n)
			return nil
		}},
	{Name: "dtype", Type: String, Default: "", Scope: PerSource, Group: GroupInPlace,
		Help: "numpy dtype of a raw file's elements (float32, uint16, \"<f4\", ...), or of a pack of raw records (windows too), for readers' typed arrays; the record size defaults to it times " + flag("shape"),
		set:  func(o *Options, s string) error { o.InPlace.DType = s; return nil }},
	{Name: "shape", Type: Shape, Default: "", Scope: PerSource, Group: GroupInPlace,
		Help: "with " + flag("dtype") + ": the shape of one record, as 3,32,32 (default: one element)",
		set:  setShape},
	{Name: "window", Type: Uint, Default: "", Scope: PerSource, Group: GroupInPlace,
		Help: "serve windows of this many consecutive rows of a file in place as records (time series)",
		set: func(o *Options, s string) error {
			window, err := strconv.ParseUint(s, 10, 31)
			if err != nil || window == 0 {
				return optionErr("window", "%s %s: give the rows per window, from 1 to %d", flag("window"), s, math.MaxInt32)
			}
			o.InPlace.Window = int64(window)
			return nil
		}},
	{Name: "stride", Type: Uint, Default: "1", Scope: PerSource, Group: GroupInPlace,
		Help: "with " + flag("window") + ": rows between window starts",
		set: func(o *Options, s string) error {
			stride, err := strconv.ParseUint(s, 10, 64)
			if err != nil || stride == 0 || stride > math.MaxInt32 {
				return optionErr("stride", "%s %s: give the rows between window starts, from 1 to %d", flag("stride"), s, math.MaxInt32)
			}
			o.InPlace.Stride = int64(stride)
			return nil
		}},
	{Name: "segments", Type: Path, Default: "", Scope: PerSource, Group: GroupInPlace,
		Help: "with " + flag("window") + ": a JSON file with an index_map of {start_row, end_row} (inclusive), in any order, or a .npy of segment start rows (int32 or int64); windows never cross a segment",
		set:  func(o *Options, s string) error { o.InPlace.Segments = s; return nil }},
}

// setShape parses --shape: the dimensions of one record, comma-separated.
func setShape(o *Options, s string) error {
	o.InPlace.Shape = nil
	for _, d := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(d), 10, 64)
		if err != nil || n < 1 {
			return optionErr("shape", "%s %s: give the dimensions of one record, each at least 1, as 3,32,32", flag("shape"), s)
		}
		o.InPlace.Shape = append(o.InPlace.Shape, n)
	}
	return nil
}
