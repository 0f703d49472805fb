package layout

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FileID names one file of a dataset for the page cache: 3*block + role.
type FileID uint64

// Roles of the files of a block, the low part of a FileID.
const (
	RoleData    = 0
	RoleIDs     = 1
	RoleOffsets = 2
	numRoles    = 3
)

// DataFile, IDsFile and OffsetsFile return the FileID of a block's files.
func DataFile(block int) FileID    { return FileID(block)*numRoles + RoleData }
func IDsFile(block int) FileID     { return FileID(block)*numRoles + RoleIDs }
func OffsetsFile(block int) FileID { return FileID(block)*numRoles + RoleOffsets }

// NamesFile returns the FileID of the names file of a dataset of the given number of blocks.
func NamesFile(blocks int) FileID { return FileID(blocks) * numRoles }

// Names returns the FileID of the names file, and whether the dataset has one.
func (d *Dataset) Names() (FileID, bool) {
	id := NamesFile(d.Blocks())
	return id, d.Manifest.Names != nil
}

// Dataset is an opened, validated dataset. It holds O(blocks) state and is immutable after
// Open, so it is safe for concurrent use. It implements cache.Source.
type Dataset struct {
	Dir      string
	Manifest *Manifest
	// recStart[b] is the index (in storage order) of block b's first record; len = blocks+1.
	recStart []uint64
	// byteStart[b] is the offset of block b's first byte in storage order; len = blocks+1.
	byteStart []uint64
	// files[id] is the resolved path of each FileID of a packed dataset ("" when the block has
	// no such file); nil for a flat file, whose blocks are ranges of flat.
	files []string
	flat  *flatFile

	// direct, when set, reads block data with O_DIRECT (see UseDirectIO); cleared for good
	// if the filesystem refuses it.
	direct atomic.Bool
}

// UseDirectIO makes ReadAt read block data files with O_DIRECT where the filesystem, the
// offset and the buffers allow it: the data goes from the disk to the caller's buffers without
// a second copy in the kernel's page cache. The mount's page cache turns it on; its buffers are
// page-aligned. Other files (ids, offsets, names) and unaligned requests read as usual.
func (d *Dataset) UseDirectIO(on bool) { d.direct.Store(on) }

// flatFile is the one file a flat dataset serves in place.
type flatFile struct {
	path       string
	dataOffset int64 // where record 0 starts
}

// Open reads and validates the dataset in dir: the manifest, and for every block that its
// files exist inside dir, are regular files of the right size, and (variable-length) that the
// offsets index starts at 0 and ends at the block's size. Nothing is served from a dataset that
// fails here. Errors wrap ErrFormat, ErrCorrupt or ErrUnsafePath and name the file.
func Open(dir string) (*Dataset, error) {
	abs, m, err := loadManifest(dir)
	if err != nil {
		return nil, err
	}
	return newDataset(abs, m, nil)
}

// loadManifest checks that dir is a directory and reads and validates its manifest. It
// returns dir's absolute path.
func loadManifest(dir string) (string, *Manifest, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil, errorf(ErrFormat, dir, -1, "no such directory")
		}
		return "", nil, errorf(ErrFormat, dir, -1, "%v", unwrapPathError(err))
	}
	if !st.IsDir() {
		return "", nil, errorf(ErrFormat, dir, -1, "not a directory (a dataset is a directory with a %s)", ManifestName)
	}
	mpath := filepath.Join(abs, ManifestName)
	data, err := readManifest(mpath)
	if err != nil {
		return "", nil, err
	}
	m, err := ParseManifest(mpath, data)
	if err != nil {
		return "", nil, err
	}
	return abs, m, nil
}

func readManifest(mpath string) ([]byte, error) {
	f, err := os.Open(mpath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrFormat, mpath, -1, "no manifest: not a blockfs dataset, or an unfinished pack (pack it with blockfs pack)")
		}
		return nil, errorf(ErrFormat, mpath, -1, "%v", unwrapPathError(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, errorf(ErrFormat, mpath, -1, "%v", unwrapPathError(err))
	}
	if len(data) > MaxManifestBytes {
		return nil, errorf(ErrFormat, mpath, -1, "manifest is larger than %d bytes", MaxManifestBytes)
	}
	return data, nil
}

// newDataset checks the block files named by a validated manifest and builds the lookup tables.
// With collect nil the first bad file is an error; otherwise each is passed to collect and
// its block is left out of the checks that follow (Verify reports them all).
func newDataset(dir string, m *Manifest, collect func(block int, err error)) (*Dataset, error) {
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	nb := len(m.Blocks)
	d := &Dataset{
		Dir:       dir,
		Manifest:  m,
		recStart:  make([]uint64, nb+1),
		byteStart: make([]uint64, nb+1),
		files:     make([]string, nb*numRoles+1),
	}
	for i, b := range m.Blocks {
		d.recStart[i+1] = d.recStart[i] + b.Records
		d.byteStart[i+1] = d.byteStart[i] + b.Bytes
		want := map[FileID]struct {
			rel  string
			size uint64
		}{DataFile(i): {b.File, b.Bytes}}
		if b.IDsFile != "" {
			want[IDsFile(i)] = struct {
				rel  string
				size uint64
			}{b.IDsFile, 8 * b.Records}
		}
		if b.OffsetsFile != "" {
			want[OffsetsFile(i)] = struct {
				rel  string
				size uint64
			}{b.OffsetsFile, 8 * (b.Records + 1)}
		}
		var bad error
		for _, id := range []FileID{DataFile(i), IDsFile(i), OffsetsFile(i)} {
			w, ok := want[id]
			if !ok || bad != nil {
				continue
			}
			p, err := d.checkFile(realDir, i, w.rel, w.size)
			d.files[id], bad = p, err
		}
		if bad == nil && b.OffsetsFile != "" {
			bad = d.checkOffsetsEnds(i)
		}
		if bad != nil {
			if collect == nil {
				return nil, bad
			}
			collect(i, bad)
		}
	}
	if m.Names != nil {
		p, err := d.checkFile(realDir, -1, m.Names.File, m.Names.Bytes)
		if err != nil {
			if collect == nil {
				return nil, err
			}
			collect(-1, err)
		}
		d.files[NamesFile(nb)] = p
	}
	return d, nil
}

// checkFile resolves rel inside realDir and checks that it is a regular file of size bytes that
// does not escape the directory through a symlink.
func (d *Dataset) checkFile(realDir string, block int, rel string, size uint64) (string, error) {
	p := filepath.Join(d.Dir, filepath.FromSlash(rel))
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", errorf(ErrCorrupt, p, block, "file is missing (the dataset is incomplete; re-pack it)")
		}
		return "", errorf(ErrCorrupt, p, block, "%v", unwrapPathError(err))
	}
	if r, err := filepath.Rel(realDir, resolved); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", errorf(ErrUnsafePath, p, block, "resolves to %s, outside the dataset directory", resolved)
	}
	st, err := os.Stat(resolved)
	if err != nil {
		return "", errorf(ErrCorrupt, p, block, "%v", unwrapPathError(err))
	}
	if !st.Mode().IsRegular() {
		return "", errorf(ErrCorrupt, p, block, "not a regular file (%s)", st.Mode().Type())
	}
	if uint64(st.Size()) != size {
		return "", errorf(ErrCorrupt, p, block, "file is %d bytes, the manifest says %d (truncated or replaced? re-pack the dataset)", st.Size(), size)
	}
	return resolved, nil
}

// checkOffsetsEnds reads the first and last entry of a block's offsets index.
func (d *Dataset) checkOffsetsEnds(block int) error {
	id := OffsetsFile(block)
	var first, last [8]byte
	if err := d.ReadAt(id, [][]byte{first[:]}, 0); err != nil {
		return err
	}
	if err := d.ReadAt(id, [][]byte{last[:]}, d.Size(id)-8); err != nil {
		return err
	}
	f, l := binary.LittleEndian.Uint64(first[:]), binary.LittleEndian.Uint64(last[:])
	if f != 0 || l != d.BlockBytes(block) {
		return errorf(ErrCorrupt, d.files[id], block, "offsets index runs from %d to %d, want 0 to %d", f, l, d.BlockBytes(block))
	}
	return nil
}

// Blocks returns the number of blocks.
func (d *Dataset) Blocks() int { return len(d.recStart) - 1 }

// Records returns the number of records.
func (d *Dataset) Records() uint64 { return d.Manifest.Records }

// Bytes returns the total size of all records.
func (d *Dataset) Bytes() uint64 { return d.Manifest.Bytes }

// Kind returns the record kind.
func (d *Dataset) Kind() Kind { return d.Manifest.Kind }

// RecordSize returns the size of a fixed-size record, 0 for variable-length datasets.
func (d *Dataset) RecordSize() int64 { return d.Manifest.RecordSize }

// BlockRecords returns the number of records in block b.
func (d *Dataset) BlockRecords(b int) uint64 { return d.recStart[b+1] - d.recStart[b] }

// BlockBytes returns the size of block b's data.
func (d *Dataset) BlockBytes(b int) uint64 { return d.byteStart[b+1] - d.byteStart[b] }

// BlockCounts returns the record count of every block, in storage order.
func (d *Dataset) BlockCounts() []uint64 {
	c := make([]uint64, d.Blocks())
	for b := range c {
		c[b] = d.BlockRecords(b)
	}
	return c
}

// Flat reports whether the dataset is one file served in place (no checksums, no ids).
func (d *Dataset) Flat() bool { return d.flat != nil }

// FirstRecord returns the storage index of block b's first record.
func (d *Dataset) FirstRecord(b int) uint64 { return d.recStart[b] }

// HasIDs reports whether source ids are stored (true after a pre-shuffle). When false, a
// record's id is its storage index.
func (d *Dataset) HasIDs() bool { return d.Manifest.IDs }

// BlockIDs returns the source ids of block b's records, in storage order: its ids file, or
// the records' storage indices when the dataset stores no ids.
func (d *Dataset) BlockIDs(b int) ([]uint64, error) {
	n := d.BlockRecords(b)
	ids := make([]uint64, n)
	if !d.HasIDs() {
		for i := range ids {
			ids[i] = d.FirstRecord(b) + uint64(i)
		}
		return ids, nil
	}
	raw := make([]byte, 8*n)
	if err := d.ReadAt(IDsFile(b), [][]byte{raw}, 0); err != nil {
		return nil, err
	}
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(raw[8*i:])
	}
	return ids, nil
}

// BlockOf returns the block holding the record with storage index i, and its index in the block.
func (d *Dataset) BlockOf(i uint64) (int, uint64) {
	b := sort.Search(d.Blocks(), func(b int) bool { return d.recStart[b+1] > i })
	return b, i - d.recStart[b]
}

// Path returns the absolute path of a file, for messages.
func (d *Dataset) Path(id FileID) string {
	if d.flat != nil {
		return d.flat.path
	}
	return d.files[id]
}

// Size returns the size of a file as the manifest says (0 for a file the dataset does not
// have). Part of cache.Source.
func (d *Dataset) Size(id FileID) int64 {
	b := int(id / numRoles)
	if b == d.Blocks() {
		if d.Manifest.Names != nil && id%numRoles == 0 {
			return int64(d.Manifest.Names.Bytes)
		}
		return 0
	}
	switch id % numRoles {
	case RoleData:
		return int64(d.BlockBytes(b))
	case RoleIDs:
		if d.HasIDs() {
			return 8 * int64(d.BlockRecords(b))
		}
	case RoleOffsets:
		if d.Kind() == Variable {
			return 8 * int64(d.BlockRecords(b)+1)
		}
	}
	return 0
}

// base returns where file id's bytes start in the file that holds them.
func (d *Dataset) base(id FileID) int64 {
	if d.flat == nil {
		return 0
	}
	return d.flat.dataOffset + int64(d.byteStart[id/numRoles])
}

// ReadAt fills bufs, in order, from file id starting at off, with one preadv per call where the
// kernel allows. A file that is gone or shorter than the manifest says gives an error wrapping
// ErrCorrupt that names the file and block: never zeros. Part of cache.Source.
func (d *Dataset) ReadAt(id FileID, bufs [][]byte, off int64) error {
	block := int(id / numRoles)
	p := d.Path(id)
	if p == "" || d.Size(id) == 0 && len(bufs) > 0 {
		return errorf(ErrCorrupt, d.Dir, block, "no file for role %d", id%numRoles)
	}
	off += d.base(id)
	if id%numRoles == RoleData && d.direct.Load() {
		done, err := d.readDirect(p, block, bufs, off)
		if done || err != nil {
			return err
		}
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errorf(ErrCorrupt, p, block, "cannot open: %v", err)
	}
	defer unix.Close(fd)
	return preadFull(fd, p, block, bufs, off)
}

// preadFull fills bufs from fd at off with as many preadv calls as it takes; a file that ends
// first is an error, never a short read.
func preadFull(fd int, p string, block int, bufs [][]byte, off int64) error {
	want := 0
	for _, b := range bufs {
		want += len(b)
	}
	got := 0
	for got < want {
		n, err := unix.Preadv(fd, skipBufs(bufs, got), off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return errorf(ErrCorrupt, p, block, "read at offset %d: %v", off+int64(got), err)
		}
		if n == 0 {
			return errorf(ErrCorrupt, p, block, "file ends at offset %d, before the bytes the dataset needs (truncated?)", off+int64(got))
		}
		got += n
	}
	return nil
}

// directAlign is the alignment O_DIRECT needs of offsets, lengths and buffers here.
const directAlign = 4096

// readDirect tries an O_DIRECT read of bufs at off. It reports done=false, with no error, when
// the request does not qualify (alignment) or the filesystem refuses O_DIRECT, and the caller
// reads as usual. The last buffer may be short (a file's tail): its capacity must then reach
// the next alignment boundary, which is read into and ignored.
func (d *Dataset) readDirect(p string, block int, bufs [][]byte, off int64) (bool, error) {
	if off%directAlign != 0 {
		return false, nil
	}
	iov := make([][]byte, len(bufs))
	want := 0
	for i, b := range bufs {
		if len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%directAlign != 0 {
			return false, nil
		}
		n := len(b)
		if n%directAlign != 0 {
			up := (n + directAlign - 1) / directAlign * directAlign
			if i != len(bufs)-1 || cap(b) < up {
				return false, nil
			}
			n = up
		}
		iov[i] = b[:n]
		want += len(b)
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECT, 0)
	if err == unix.EINVAL {
		d.direct.Store(false) // this filesystem has no O_DIRECT
		return false, nil
	}
	if err != nil {
		return true, errorf(ErrCorrupt, p, block, "cannot open: %v", err)
	}
	defer unix.Close(fd)
	got := 0
	for got < want {
		n, err := unix.Preadv(fd, skipBufs(iov, got), off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err == unix.EINVAL && got == 0 {
			return false, nil
		}
		if err != nil {
			return true, errorf(ErrCorrupt, p, block, "read at offset %d: %v", off+int64(got), err)
		}
		if n == 0 {
			return true, errorf(ErrCorrupt, p, block, "file ends at offset %d, before the bytes the dataset needs (truncated?)", off+int64(got))
		}
		got += n
		if got%directAlign != 0 && got < want {
			// A short read that breaks alignment before the end: finish without O_DIRECT.
			bfd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return true, errorf(ErrCorrupt, p, block, "cannot open: %v", err)
			}
			defer unix.Close(bfd)
			return true, preadFull(bfd, p, block, skipBufs(bufs, got), off+int64(got))
		}
	}
	return true, nil
}

// skipBufs returns the iovecs of bufs after the first n bytes.
func skipBufs(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if n == 0 || len(bufs) == 0 {
		return bufs
	}
	out := make([][]byte, len(bufs))
	copy(out, bufs)
	out[0] = out[0][n:]
	return out
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// String summarizes the dataset in one line.
func (d *Dataset) String() string {
	return fmt.Sprintf("%s: %d %s records in %d blocks", d.Dir, d.Records(), d.Kind(), d.Blocks())
}
