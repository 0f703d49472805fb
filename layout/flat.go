package layout

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// FlatOptions describe how to serve one existing file in place.
type FlatOptions struct {
	// RecordSize is the size of a record for a raw file; a .npy file gives its own (it may
	// also be given, and must then agree).
	RecordSize int64
	// BlockSize is the size of a logical block; default DefaultBlockSize. A block holds
	// floor(BlockSize / record size) records, at least one.
	BlockSize int64
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
		return nil, wrapf(ErrFormat, err, path, -1, "%v", unwrapPathError(err))
	}
	// Checked before it is opened: opening a FIFO would wait for a writer.
	if st, err := os.Stat(abs); err == nil && !st.Mode().IsRegular() {
		return nil, errorf(ErrFormat, path, -1, "not a regular file")
	}
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, wrapf(ErrFormat, err, path, -1, "%v", unwrapPathError(err))
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
	var offset int64
	if IsNpy(f) {
		npy, err := ParseNpy(path, f, st.Size())
		if err != nil {
			return nil, err
		}
		if opt.RecordSize != 0 && opt.RecordSize != npy.RecordSize {
			return nil, errorf(ErrFormat, path, -1, "--record-size %d disagrees with the .npy rows of %d bytes (%s %v)", opt.RecordSize, npy.RecordSize, npy.DType, npy.Shape)
		}
		m.RecordSize, m.DType, m.Shape, offset = npy.RecordSize, npy.DType, npy.Shape, npy.DataOffset
	} else {
		if opt.RecordSize <= 0 {
			return nil, errorf(ErrFormat, path, -1, "a raw file needs --record-size (the size of one record in bytes)")
		}
		if st.Size()%opt.RecordSize != 0 {
			return nil, errorf(ErrFormat, path, -1, "file is %d bytes, not a multiple of the record size %d (%d bytes left over); check --record-size", st.Size(), opt.RecordSize, st.Size()%opt.RecordSize)
		}
		m.RecordSize = opt.RecordSize
	}
	if m.RecordSize > MaxRecordSize {
		return nil, errorf(ErrFormat, path, -1, "record size %d exceeds the limit of %d", m.RecordSize, MaxRecordSize)
	}
	bs := opt.BlockSize
	if bs == 0 {
		bs = DefaultBlockSize
	}
	if bs > MaxBlockBytes {
		return nil, errorf(ErrFormat, path, -1, "block size %d exceeds the limit of %d", bs, int64(MaxBlockBytes))
	}
	n := uint64((st.Size() - offset) / m.RecordSize)
	if n == 0 {
		return nil, errorf(ErrFormat, path, -1, "no records (the file holds no data)")
	}
	per := uint64(max(1, bs/m.RecordSize))
	nb := (n + per - 1) / per
	m.Records, m.Bytes = n, n*uint64(m.RecordSize)
	d := &Dataset{Dir: filepath.Dir(abs), Manifest: m, flat: &flatFile{path: abs, dataOffset: offset, ident: identity(st)},
		recStart: make([]uint64, nb+1), byteStart: make([]uint64, nb+1)}
	for b := uint64(0); b < nb; b++ {
		d.recStart[b+1] = min(n, (b+1)*per)
		d.byteStart[b+1] = d.recStart[b+1] * uint64(m.RecordSize)
	}
	return d, nil
}
