package layout

import (
	"fmt"
	"math"
	"sort"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/source"
)

// WindowOptions describe windows over the rows of a file served in place: each record is L
// consecutive rows that never cross a segment, starting at seg.Start + k*Stride for every k with
// start + L - 1 <= seg.End.
type WindowOptions struct {
	Length   int64     // L, rows per window; at least 1
	Stride   int64     // S, rows between window starts; default 1
	Segments []Segment // sorted, disjoint, inclusive row ranges; nil: the whole file is one
}

// windows is the shape of windows over rows. Block b's windows start at rows first[b],
// first[b]+stride, ... (one per record) when they are one segment's; windows of short segments
// share blocks, and then runs says where each segment's windows start. A block's data file is
// the rows from its first window's start to its last window's end.
type windows struct {
	starts         recordStarts
	length, stride int64 // in rows
	rowBytes       int64
	first          []int64 // first window start row of each block
	// runs is nil when every block's windows are one segment's. Otherwise it lists every
	// segment that has windows, in order: run r's windows are the records from runs[r].rec
	// (storage index) up to the next run's, starting at rows runs[r].row, +stride, ...
	runs     []windowRun
	segments int
	rows     rowSource // the rows: a file in place, or a pack stored in order
}

// windowRun is where one segment's windows are: the first's storage index and start row.
type windowRun struct {
	rec uint64
	row int64
}

// rowSource is a shape of fixed-size rows in stored order, which windows can span (a file in
// place, a pack).
type rowSource interface {
	shape
	// rowExtent returns where the size bytes of rows from row on are: one extent, or parts
	// when they run across files.
	rowExtent(row, size int64) source.Extent
}

func (w *windows) file(id FileID) (File, bool) { return w.starts.blockData(id, w.blockExtent) }

// blockExtent is the rows block b's windows cover.
func (w *windows) blockExtent(b int) source.Extent {
	return w.rows.rowExtent(w.first[b], int64(w.blockBytes(b)))
}

// startRow returns the start row of the window with storage index i, which block b holds.
func (w *windows) startRow(b int, i uint64) int64 {
	if w.runs == nil {
		return w.first[b] + int64(i-w.starts[b])*w.stride
	}
	r := sort.Search(len(w.runs), func(r int) bool { return w.runs[r].rec > i }) - 1
	return w.runs[r].row + int64(i-w.runs[r].rec)*w.stride
}

func (w *windows) blockBytes(b int) uint64 {
	end := w.startRow(b, w.starts[b+1]-1) + w.length
	return uint64((end - w.first[b]) * w.rowBytes)
}

func (w *windows) recordStride() int64 { return w.stride * w.rowBytes }

func (w *windows) recordOffset(b int, local uint64) uint64 {
	return uint64((w.startRow(b, w.starts[b]+local) - w.first[b]) * w.rowBytes)
}

func (w *windows) regular() bool { return w.runs == nil }

func (w *windows) sourceID(b int, local uint64) uint64 {
	return uint64(w.startRow(b, w.starts[b]+local))
}

func (w *windows) verifiable() error {
	if err := w.rows.verifiable(); err != nil {
		return err
	}
	return fmt.Errorf("%s: windows are read across block files, whose checksums cover whole blocks; check the pack with blockfs verify instead", w.rows.where())
}

func (w *windows) where() string { return w.rows.where() }

func (w *windows) inPlace() (string, int64, bool) { return w.rows.inPlace() }

// Windows turns rows, a dataset of fixed-size rows in stored order (a file in place from
// OpenFlat, or a pack made without the pre-shuffle), into a dataset whose records are windows of
// opt.Length rows. Record ids are window start rows. Its blocks are runs of consecutive window
// starts, as many as keep the rows from the first's start to the last's end within blockSize
// (at least one window; 0: an AutoBlockSize of the rows that holds four windows):
//
//   - the windows of a segment that fills a block (a long one) are cut into blocks of their
//     own, so neighbouring blocks share Length-1 rows and every other row is read once per
//     epoch;
//   - the windows of a segment that does not (a short one) join the block of the short
//     segments before it when they fit in it, else start one: a block then holds several
//     segments' windows, and the rows between them (too short for a window, or in no segment)
//     are read with it. A million entities of two rows make a few blocks, not a million.
//
// At most MaxBlocks blocks (the per-block state budget) and MaxSegments segments. Errors name
// the file and say what to change.
func Windows(rows *Dataset, opt WindowOptions, blockSize int64) (*Dataset, error) {
	path, R, n := rows.Where(), rows.RecordSize(), int64(rows.Records())
	bad := func(format string, a ...any) error { return errorf(ErrFormat, path, -1, format, a...) }
	src, ok := rows.shape.(rowSource)
	switch {
	case !ok:
		return nil, bad("already windowed")
	case rows.Kind() != Fixed:
		return nil, bad("windows need fixed-size rows; this dataset holds variable-length records")
	case rows.HasIDs():
		return nil, bad("windows need rows in stored order, and pack pre-shuffled these; pack the source again with %s, or serve the .npy or raw file in place", optname.Flag("no-shuffle"))
	}
	if opt.Stride == 0 {
		opt.Stride = 1
	}
	switch {
	case opt.Length < 1:
		return nil, bad("%s %d: a window needs at least 1 row", optname.Flag("window"), opt.Length)
	case opt.Stride < 1:
		return nil, bad("%s %d: must be at least 1", optname.Flag("stride"), opt.Stride)
	case opt.Length > MaxRecordSize/R:
		return nil, bad("%s %d rows of %d bytes exceed the record limit of %d bytes", optname.Flag("window"), opt.Length, R, int64(MaxRecordSize))
	}
	segs := opt.Segments
	if segs == nil {
		segs = []Segment{{0, n - 1}}
	}
	if err := checkSegments(path, segs, n); err != nil {
		return nil, err
	}
	if blockSize == 0 {
		// A block holds a few windows, so that windows shared across block edges stay few.
		blockSize = AutoBlockSize(n*R, min(4*opt.Length*R, MaxBlockBytes))
	}
	switch {
	case blockSize > MaxBlockBytes:
		return nil, bad("block size %d exceeds the limit of %d", blockSize, int64(MaxBlockBytes))
	case opt.Length*R > blockSize:
		// Each window would be a block of its own: O(windows) of state instead of O(blocks).
		return nil, bad("a window of %d rows (%d bytes) is larger than %s %d; raise %s (a block should hold many windows)",
			opt.Length, opt.Length*R, optname.Flag("block-size"), blockSize, optname.Flag("block-size"))
	}
	rowsPer := blockSize / R
	per := max(1, (rowsPer-opt.Length)/opt.Stride+1) // windows a block holds
	w := &windows{starts: recordStarts{0}, length: opt.Length, stride: opt.Stride, rowBytes: R, segments: len(segs), rows: src}
	if !w.cut(segs, per, rowsPer) {
		return nil, tooManyBlocks(path, blockSize)
	}
	total := w.starts[len(w.starts)-1]
	if total == 0 {
		return nil, bad("no segment holds a window of %d rows (the longest has %d); lower %s", opt.Length, longest(segs), optname.Flag("window"))
	}
	if total > uint64(math.MaxInt64/(opt.Length*R)) {
		return nil, bad("%d windows of %d bytes make an epoch larger than 8 EiB; raise %s or lower %s", total, opt.Length*R, optname.Flag("stride"), optname.Flag("window"))
	}
	m := *rows.Manifest
	m.RecordSize, m.Records, m.Bytes = opt.Length*R, total, total*uint64(opt.Length*R)
	if m.Shape != nil || m.DType != "" {
		m.Shape = append([]int64{opt.Length}, rows.Manifest.Shape...)
	}
	m.Blocks = nil // the blocks are the windows'; the pack's stay in rows
	d := &Dataset{Dir: rows.Dir, Manifest: &m, starts: w.starts, shape: w, store: rows.store}
	if rows.framed {
		// The pack's files are compressed: the windows' rows are read uncompressed from it.
		d.below = rows
	}
	return d, nil
}

// cut cuts the windows of segs into blocks as Windows says, per windows and rowsPer rows a
// block at most: a long segment's windows into blocks of their own, a short one's into the
// block of the short segments before it where they fit. It reports false when they would
// take more than MaxBlocks blocks.
func (w *windows) cut(segs []Segment, per, rowsPer int64) bool {
	runs := make([]windowRun, 0, min(len(segs), 1<<16))
	open, shared := false, false // the last block holds short segments; a block holds several
	for _, s := range segs {
		if s.End-s.Start+1 < w.length {
			continue
		}
		count := (s.End-s.Start+1-w.length)/w.stride + 1
		last := len(w.starts) - 1
		runs = append(runs, windowRun{rec: w.starts[last], row: s.Start})
		if count < per && open && s.Start+(count-1)*w.stride+w.length-w.first[last-1] <= rowsPer {
			w.starts[last] += uint64(count)
			shared = true
			continue
		}
		for k := int64(0); k < count; k += per {
			if len(w.first) == MaxBlocks {
				return false
			}
			w.first = append(w.first, s.Start+k*w.stride)
			w.starts = append(w.starts, w.starts[len(w.starts)-1]+uint64(min(per, count-k)))
		}
		open = count < per
	}
	if shared {
		w.runs = runs
	}
	return true
}

func longest(segs []Segment) int64 {
	var l int64
	for _, s := range segs {
		l = max(l, s.End-s.Start+1)
	}
	return l
}

// Window returns a windowed dataset's window length and stride in rows, its row size, its
// segment count, and false for other datasets.
func (d *Dataset) Window() (length, stride, rowBytes int64, segments int, ok bool) {
	w, ok := d.shape.(*windows)
	if !ok {
		return 0, 0, 0, 0, false
	}
	return w.length, w.stride, w.rowBytes, w.segments, true
}

// WindowsFirstRow returns the row of the pack below (Stored) where block b's data file of
// windows starts: its first window's first row; false for a dataset that is not windows.
func (d *Dataset) WindowsFirstRow(b int) (int64, bool) {
	w, ok := d.shape.(*windows)
	if !ok || b < 0 || b >= len(w.first) {
		return 0, false
	}
	return w.first[b], true
}
