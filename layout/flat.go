package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/source"
)

// FlatOptions describe how to serve one existing file in place.
type FlatOptions struct {
	// RecordSize is the size of a record for a raw file; a .npy file gives its own (it may
	// also be given, and must then agree).
	RecordSize int64
	// BlockSize is the size of a logical block; 0: AutoBlockSize of the data. A block holds
	// floor(BlockSize / record size) records, at least one.
	BlockSize int64
	// Offset is where record 0 starts in a raw file (after a header); default 0.
	Offset int64
	// DType and Shape describe a record of a raw file as numpy does (a type string such as
	// "<f4", or a name such as float32; the shape of one record, empty for one element):
	// info.json then gives readers a typed array. The record size defaults to their product.
	// A .npy file gives its own; given as well, they must agree.
	DType string
	Shape []int64
	// Records is how many records a raw file holds from Offset (a trailer may follow them);
	// 0: as many as fill the rest of the file, which must then be whole records.
	Records int64
}

// OpenFlat opens a flat file of fixed-size records, or a .npy file, as a dataset whose blocks
// are consecutive ranges of the file. Nothing is copied or written; record i's source id is i.
func OpenFlat(path string, opt FlatOptions) (*Dataset, error) {
	abs, err := filepath.Abs(path)
	if err == nil {
		// Reads open the file itself, never through a link (see source/local).
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrFormat, path, -1, "no such file")
		}
		return nil, PathError(ErrFormat, path, err)
	}
	// Checked before it is opened: opening a FIFO would wait for a writer.
	if st, err := os.Stat(abs); err == nil && !st.Mode().IsRegular() {
		return nil, errorf(ErrFormat, path, -1, "not a regular file")
	}
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, PathError(ErrFormat, path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errorf(ErrFormat, path, -1, "not a regular file")
	}
	m := &Manifest{Format: FormatName, Version: Version, Kind: Fixed, Source: abs}
	offset, n, err := flatRecords(path, f, st.Size(), opt, m)
	if err != nil {
		return nil, err
	}
	if m.RecordSize > MaxRecordSize {
		return nil, errorf(ErrFormat, path, -1, "record size %d exceeds the limit of %d", m.RecordSize, MaxRecordSize)
	}
	bs := opt.BlockSize
	if bs == 0 {
		bs = AutoBlockSize(n*m.RecordSize, m.RecordSize)
	}
	if bs > MaxBlockBytes {
		return nil, errorf(ErrFormat, path, -1, "block size %d exceeds the limit of %d", bs, int64(MaxBlockBytes))
	}
	if n == 0 {
		return nil, errorf(ErrFormat, path, -1, "no records (the file holds no data)")
	}
	per := uint64(max(1, bs/m.RecordSize))
	nb := (uint64(n) + per - 1) / per
	if nb > MaxBlocks {
		least := (uint64(n) + MaxBlocks - 1) / MaxBlocks * uint64(m.RecordSize)
		return nil, errorf(ErrFormat, path, -1, "%s %d cuts the file into %d blocks; blockfs keeps about 40 bytes of state for each block and allows at most %d: raise %s to at least %d (or leave it out: auto)",
			optname.Flag("block-size"), bs, nb, MaxBlocks, optname.Flag("block-size"), least)
	}
	m.Records, m.Bytes = uint64(n), uint64(n)*uint64(m.RecordSize)
	in := &flatFile{inOrder: newInOrder(int(nb), m.RecordSize), path: abs, dataOffset: offset, ident: FileIdentity(st)}
	for b := uint64(0); b < nb; b++ {
		in.starts[b+1] = min(uint64(n), (b+1)*per)
	}
	return &Dataset{Dir: filepath.Dir(abs), Manifest: m, starts: in.starts, shape: in}, nil
}

// flatRecords sets m's record size, dtype and shape for the file f of size bytes (a .npy's
// own, checked against opt; a raw file's from opt) and returns where record 0 starts and how
// many records the file serves.
func flatRecords(path string, f *os.File, size int64, opt FlatOptions, m *Manifest) (offset, n int64, err error) {
	if !IsNpy(f) {
		if opt, err = rawElement(path, opt); err != nil {
			return 0, 0, err
		}
		if n, err = rawExtent(path, size, opt); err != nil {
			return 0, 0, err
		}
		m.RecordSize, m.DType, m.Shape = opt.RecordSize, opt.DType, opt.Shape
		return opt.Offset, n, nil
	}
	if opt.Offset != 0 || opt.Records != 0 {
		return 0, 0, errorf(ErrFormat, path, -1, "%s and %s are for raw files; a .npy file gives its own data offset and length", optname.Flag("offset"), optname.Flag("records"))
	}
	npy, err := ParseNpy(path, f, size)
	if err != nil {
		return 0, 0, err
	}
	if opt.RecordSize != 0 && opt.RecordSize != npy.RecordSize {
		return 0, 0, errorf(ErrFormat, path, -1, "%s %d disagrees with the .npy rows of %d bytes (%s %v)", optname.Flag("record-size"), opt.RecordSize, npy.RecordSize, npy.DType, npy.Shape)
	}
	if err := agreeNpy(path, opt, npy); err != nil {
		return 0, 0, err
	}
	m.RecordSize, m.DType, m.Shape = npy.RecordSize, npy.DType, npy.Shape
	return npy.DataOffset, (size - npy.DataOffset) / m.RecordSize, nil
}

// rawExtent checks the record size, offset and count of a raw file of size bytes and returns
// how many records it serves.
func rawExtent(path string, size int64, opt FlatOptions) (int64, error) {
	rs := opt.RecordSize
	switch {
	case rs <= 0:
		return 0, errorf(ErrFormat, path, -1, "a raw file needs %s (the size of one record in bytes), or %s (and %s) of its records", optname.Flag("record-size"), optname.Flag("dtype"), optname.Flag("shape"))
	case opt.Offset < 0 || opt.Offset > size:
		return 0, errorf(ErrFormat, path, -1, "%s %d is outside the file (%d bytes)", optname.Flag("offset"), opt.Offset, size)
	case opt.Records < 0:
		return 0, errorf(ErrFormat, path, -1, "%s %d is negative", optname.Flag("records"), opt.Records)
	}
	avail := size - opt.Offset
	if opt.Records > 0 {
		if opt.Records > avail/rs {
			return 0, errorf(ErrFormat, path, -1, "%s %d of %d bytes from %s %d pass the end of the file: there are %d bytes after the offset (%d whole records)",
				optname.Flag("records"), opt.Records, rs, optname.Flag("offset"), opt.Offset, avail, avail/rs)
		}
		return opt.Records, nil
	}
	if avail%rs != 0 {
		what := "file is"
		if opt.Offset > 0 {
			what = fmt.Sprintf("the file after %s %d is", optname.Flag("offset"), opt.Offset)
		}
		return 0, errorf(ErrFormat, path, -1, "%s %d bytes, not a multiple of the record size %d (%d bytes left over); check %s, or give %s for a file with a trailer",
			what, avail, rs, avail%rs, optname.Flag("record-size"), optname.Flag("records"))
	}
	return avail / rs, nil
}

// flatFile is the shape of a dataset served in place: its blocks are consecutive ranges of
// one file of fixed-size records, which has no checksums and no ids.
type flatFile struct {
	inOrder
	path       string
	dataOffset int64 // where record 0 starts
	ident      source.Identity
}

func (f *flatFile) file(id FileID) (File, bool) { return f.starts.blockData(id, f.blockExtent) }

// blockExtent is block b's range of the file.
func (f *flatFile) blockExtent(b int) source.Extent {
	return f.rowExtent(int64(f.starts[b]), int64(f.blockBytes(b)))
}

// rowExtent implements rowSource.
func (f *flatFile) rowExtent(row, size int64) source.Extent {
	return source.Extent{Name: f.path, Offset: f.dataOffset + row*f.recordSize, Size: size, Ident: f.ident}
}

func (f *flatFile) verifiable() error {
	return fmt.Errorf("%s is served in place and has no checksums to verify", f.path)
}

func (f *flatFile) where() string { return f.path }

func (f *flatFile) inPlace() (string, int64, bool) { return f.path, f.dataOffset, true }

// rawElement checks the dtype and shape given for a raw file and returns opt with the dtype
// as a numpy type string and the record size set (from them, when not given).
func rawElement(path string, opt FlatOptions) (FlatOptions, error) {
	if opt.DType == "" {
		if opt.Shape != nil {
			return opt, errorf(ErrFormat, path, -1, "%s goes with %s (the type of each element)", optname.Flag("shape"), optname.Flag("dtype"))
		}
		return opt, nil
	}
	dt, err := ParseDType(opt.DType)
	if err != nil {
		return opt, errorf(ErrFormat, path, -1, "%s: %v", optname.Flag("dtype"), err)
	}
	size, _ := DTypeSize(dt)
	for _, d := range opt.Shape {
		if d < 1 || size > MaxRecordSize/d {
			return opt, errorf(ErrFormat, path, -1, "%s %v: each dimension must be at least 1, and a record at most %d bytes", optname.Flag("shape"), opt.Shape, int64(MaxRecordSize))
		}
		size *= d
	}
	if opt.RecordSize != 0 && opt.RecordSize != size {
		return opt, errorf(ErrFormat, path, -1, "%s %d disagrees with %s %s and %s %v (%d bytes a record); drop %s, or fix the shape",
			optname.Flag("record-size"), opt.RecordSize, optname.Flag("dtype"), dt, optname.Flag("shape"), opt.Shape, size, optname.Flag("record-size"))
	}
	opt.DType, opt.RecordSize = dt, size
	if opt.Shape == nil {
		opt.Shape = []int64{}
	}
	return opt, nil
}

// agreeNpy refuses a dtype or shape given for a .npy file that says otherwise.
func agreeNpy(path string, opt FlatOptions, npy *Npy) error {
	if opt.DType != "" {
		dt, err := ParseDType(opt.DType)
		if err != nil {
			return errorf(ErrFormat, path, -1, "%s: %v", optname.Flag("dtype"), err)
		}
		if dt != npy.DType {
			return errorf(ErrFormat, path, -1, "%s %s disagrees with the .npy's %s (a .npy gives its own dtype; drop %s)",
				optname.Flag("dtype"), opt.DType, npy.DType, optname.Flag("dtype"))
		}
	}
	if opt.Shape != nil && !slices.Equal(opt.Shape, npy.Shape) {
		return errorf(ErrFormat, path, -1, "%s %v disagrees with the .npy's rows shaped %v (drop %s)", optname.Flag("shape"), opt.Shape, npy.Shape, optname.Flag("shape"))
	}
	return nil
}

// Typed returns d with its fixed-size records typed as numpy's dtype and shape say (the
// --dtype and --shape of a file in place, for a pack of raw records, which says none): the
// same records, which readers then read as typed arrays. Nothing given: d. Refused for
// records that vary in size, for a dataset that says another type, and for a type whose size
// is not the record size.
func (d *Dataset) Typed(dtype string, shape []int64) (*Dataset, error) {
	if dtype == "" && shape == nil {
		return d, nil
	}
	m := *d.Manifest
	if m.Kind != Fixed {
		return nil, errorf(ErrFormat, d.Dir, -1, "%s is for fixed-size records; this dataset's vary in size", optname.Flag("dtype"))
	}
	opt, err := rawElement(d.Dir, FlatOptions{DType: dtype, Shape: shape})
	if err != nil {
		return nil, err
	}
	if opt.RecordSize != m.RecordSize {
		return nil, errorf(ErrFormat, d.Dir, -1, "%s %s and %s %v make records of %d bytes; this dataset's are %d bytes", optname.Flag("dtype"), opt.DType,
			optname.Flag("shape"), opt.Shape, opt.RecordSize, m.RecordSize)
	}
	if m.DType != "" && (m.DType != opt.DType || !slices.Equal(m.Shape, opt.Shape)) {
		return nil, errorf(ErrFormat, d.Dir, -1, "the dataset says its records are %s %v; drop %s and %s", m.DType, m.Shape, optname.Flag("dtype"), optname.Flag("shape"))
	}
	m.DType, m.Shape = opt.DType, opt.Shape
	typed := *d
	typed.Manifest = &m
	return &typed, nil
}
