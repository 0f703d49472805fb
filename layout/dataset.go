package layout

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"syscall"

	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

// FileID names one file of a dataset: 3*block + role for a block's files, 3*blocks for the
// names file. Make them with DataFile, IDsFile, OffsetsFile and NamesFile; read what one names
// with Dataset.File (the only place that decodes them).
type FileID = source.FileID

// Role is what a file of a dataset holds.
type Role uint8

// Roles. A block has a data file, and an ids file (pre-shuffled datasets) and an offsets index
// (variable-length datasets); a dataset may have one names file.
const (
	RoleData    Role = 0
	RoleIDs     Role = 1
	RoleOffsets Role = 2
	RoleNames   Role = 3
	numRoles         = 3 // FileIDs per block
)

func (r Role) String() string {
	return [...]string{"data", "ids", "offsets", "names"}[r]
}

// DataFile, IDsFile and OffsetsFile return the FileID of a block's files.
func DataFile(block int) FileID    { return FileID(block)*numRoles + FileID(RoleData) }
func IDsFile(block int) FileID     { return FileID(block)*numRoles + FileID(RoleIDs) }
func OffsetsFile(block int) FileID { return FileID(block)*numRoles + FileID(RoleOffsets) }

// BlockOfFile returns the block of a block's file (data, ids or offsets); for the names file,
// the number of blocks (one past the last).
func BlockOfFile(id FileID) int { return int(id / numRoles) }

// NamesFile returns the FileID of the names file of a dataset of the given number of blocks.
func NamesFile(blocks int) FileID { return FileID(blocks) * numRoles }

// RoleFile returns the FileID of block b's file of role r (data, ids or offsets).
func RoleFile(block int, r Role) FileID { return FileID(block)*numRoles + FileID(r) }

// File is one entry of a dataset's file table: where the file is (its path, and for a file
// served in place the range of it), its role and block, and its checksum.
type File struct {
	source.Extent        // Name is the absolute path
	Role          Role   // what it holds
	Block         int    // its block, or -1 for the names file
	CRC32C        uint32 // the manifest's checksum, when HasCRC
	HasCRC        bool   // false for files served in place
}

// Names returns the FileID of the names file, and whether the dataset has one.
func (d *Dataset) Names() (FileID, bool) {
	id := NamesFile(d.Blocks())
	return id, d.Manifest.Names != nil
}

// Dataset is an opened, validated dataset: its manifest and its file table. It holds
// O(blocks) state, does no I/O after Open and is immutable, so it is safe for concurrent use.
// It implements source.Table; package source/local (or another backend) reads the files.
type Dataset struct {
	Dir      string
	Manifest *Manifest
	// recStart[b] is the index (in storage order) of block b's first record; len = blocks+1.
	recStart []uint64
	// byteStart[b] is the offset of block b's first byte in storage order; len = blocks+1.
	byteStart []uint64
	// files[id] is the table entry of each FileID of a packed dataset (Size 0 when the block
	// has no such file); nil for a flat file, whose table is computed (see File).
	files []File
	flat  *flatFile
	win   *windowing // windows over flat's rows (see Windows), or nil
	// src reads the files from where the dataset was opened (the Store's Blocks); nil for a
	// dataset served in place (Source reads it locally).
	src source.Blocks
}

// Source returns a source.Blocks over the dataset's files where the dataset was opened: a
// local directory (buffered reads) or an object store. A mount builds its own (direct I/O,
// --verify) where it wants more.
func (d *Dataset) Source() source.Blocks {
	if d.src == nil {
		return local.New(d, false)
	}
	return d.src
}

// flatFile is the one file a flat dataset serves in place.
type flatFile struct {
	path       string
	dataOffset int64 // where record 0 starts
	ident      source.Identity
}

// File returns the table entry of file id, and false for a file the dataset does not have.
func (d *Dataset) File(id FileID) (File, bool) {
	if d.win != nil {
		b := int(id / numRoles)
		if b >= d.Blocks() || Role(id%numRoles) != RoleData {
			return File{Block: -1}, false
		}
		return d.windowFile(b), true
	}
	if d.flat == nil {
		if id >= FileID(len(d.files)) || d.files[id].Name == "" {
			return File{Block: -1}, false
		}
		return d.files[id], true
	}
	b := int(id / numRoles)
	if b >= d.Blocks() || Role(id%numRoles) != RoleData {
		return File{Block: -1}, false
	}
	return File{Extent: source.Extent{Name: d.flat.path, Offset: d.flat.dataOffset + int64(d.byteStart[b]),
		Size: int64(d.BlockBytes(b)), Ident: d.flat.ident}, Role: RoleData, Block: b}, true
}

// Extent implements source.Table.
func (d *Dataset) Extent(id FileID) (source.Extent, bool) {
	f, ok := d.File(id)
	return f.Extent, ok
}

// Size returns the size of file id (0 for a file the dataset does not have).
func (d *Dataset) Size(id FileID) int64 {
	f, _ := d.File(id)
	return f.Size
}

// Path returns the absolute path of file id, for messages.
func (d *Dataset) Path(id FileID) string {
	f, _ := d.File(id)
	return f.Name
}

// Open reads and validates the dataset in dir: the manifest, and for every block that its
// files exist inside dir, are regular files of the right size, and (variable-length) that the
// offsets index starts at 0 and ends at the block's size. Nothing is served from a dataset that
// fails here. Errors wrap ErrFormat, ErrCorrupt or ErrUnsafePath and name the file.
func Open(dir string) (*Dataset, error) {
	st, err := newDirStore(dir)
	if err != nil {
		return nil, err
	}
	return OpenStore(st)
}

func readManifest(mpath string) ([]byte, error) {
	f, err := os.Open(mpath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrFormat, mpath, -1, "no manifest: not a blockfs dataset, or an unfinished pack (pack it with blockfs pack)")
		}
		return nil, wrapf(ErrFormat, err, mpath, -1, "%v", unwrapPathError(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, wrapf(ErrFormat, err, mpath, -1, "%v", unwrapPathError(err))
	}
	if len(data) > MaxManifestBytes {
		return nil, errorf(ErrFormat, mpath, -1, "manifest is larger than %d bytes", MaxManifestBytes)
	}
	return data, nil
}

// newDataset checks the block files named by a validated manifest in st and builds the file
// table. With collect nil the first bad file is an error; otherwise each is passed to collect
// and its block is left out of the checks that follow (Verify reports them all).
func newDataset(st Store, m *Manifest, collect func(block int, err error)) (*Dataset, error) {
	nb := len(m.Blocks)
	d := &Dataset{
		Dir:       st.Location(),
		Manifest:  m,
		recStart:  make([]uint64, nb+1),
		byteStart: make([]uint64, nb+1),
		files:     make([]File, nb*numRoles+1),
	}
	src := st.Blocks(d) // reads the table as it fills
	d.src = src
	for i, b := range m.Blocks {
		d.recStart[i+1] = d.recStart[i] + b.Records
		d.byteStart[i+1] = d.byteStart[i] + b.Bytes
		files := []File{{Extent: source.Extent{Name: b.File, Size: int64(b.Bytes)}, Role: RoleData, CRC32C: b.CRC32C}}
		if b.IDsFile != "" {
			files = append(files, File{Extent: source.Extent{Name: b.IDsFile, Size: 8 * int64(b.Records)}, Role: RoleIDs, CRC32C: b.IDsCRC32C})
		}
		if b.OffsetsFile != "" {
			files = append(files, File{Extent: source.Extent{Name: b.OffsetsFile, Size: 8 * int64(b.Records+1)}, Role: RoleOffsets, CRC32C: b.OffsetsCRC32C})
		}
		var bad error
		for _, f := range files {
			if bad = d.addFile(st, i, f); bad != nil {
				break
			}
		}
		if bad == nil && b.OffsetsFile != "" {
			bad = d.checkOffsetsEnds(src, i)
		}
		if bad != nil {
			if collect == nil {
				return nil, bad
			}
			collect(i, bad)
		}
	}
	if m.Names != nil {
		f := File{Extent: source.Extent{Name: m.Names.File, Size: int64(m.Names.Bytes)}, Role: RoleNames, CRC32C: m.Names.CRC32C}
		if err := d.addFile(st, -1, f); err != nil {
			if collect == nil {
				return nil, err
			}
			collect(-1, err)
		}
	}
	return d, nil
}

// addFile checks the file f names (relative to the dataset) in st and enters it in the table,
// with the identity every later read checks (the manifest's CRC32C included).
func (d *Dataset) addFile(st Store, block int, f File) error {
	p, ident, err := checkFile(st, block, f.Name, uint64(f.Size))
	if err != nil {
		return err
	}
	ident.CRC32C, ident.HasCRC = f.CRC32C, true
	f.Name, f.Ident, f.Block, f.HasCRC = p, ident, block, true
	id := NamesFile(d.Blocks())
	if f.Role != RoleNames {
		id = RoleFile(block, f.Role)
	}
	d.files[id] = f
	return nil
}

// checkFile asks st where the file rel is and what it is, and checks that it is size bytes. It
// returns the backend's name for the file and its identity.
func checkFile(st Store, block int, rel string, size uint64) (string, source.Identity, error) {
	p := st.Path(rel)
	name, ident, err := st.Stat(rel)
	var le *Error
	switch {
	case errors.As(err, &le):
		le.Block = block
		return "", ident, le
	case errors.Is(err, fs.ErrNotExist):
		return "", ident, errorf(ErrCorrupt, p, block, "file is missing (the dataset is incomplete; re-pack it)")
	case err != nil:
		return "", ident, wrapf(ErrIO, err, p, block, "%v", err)
	case uint64(ident.Size) != size:
		return "", ident, errorf(ErrCorrupt, p, block, "file is %d bytes, the manifest says %d (truncated or replaced? re-pack the dataset)", ident.Size, size)
	}
	return name, ident, nil
}

// identity returns what a local file is: device, inode, size and modification time.
func identity(st fs.FileInfo) source.Identity {
	id := source.Identity{Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Ino = uint64(sys.Dev), sys.Ino
	}
	return id
}

// checkOffsetsEnds reads the first and last entry of a block's offsets index.
func (d *Dataset) checkOffsetsEnds(src source.Blocks, block int) error {
	id := OffsetsFile(block)
	var first, last [8]byte
	if err := src.Fill(context.Background(), id, 0, [][]byte{first[:]}); err != nil {
		return d.ioError(id, err)
	}
	if err := src.Fill(context.Background(), id, d.Size(id)-8, [][]byte{last[:]}); err != nil {
		return d.ioError(id, err)
	}
	f, l := binary.LittleEndian.Uint64(first[:]), binary.LittleEndian.Uint64(last[:])
	if f != 0 || l != d.BlockBytes(block) {
		return errorf(ErrCorrupt, d.Path(id), block, "offsets index runs from %d to %d, want 0 to %d", f, l, d.BlockBytes(block))
	}
	return nil
}

// ioError describes a failed read of file id: corruption when the file is shorter than the
// table says or gone, and otherwise the cause (EMFILE, EIO) as it is. Either way the cause
// stays reachable with errors.Is.
func (d *Dataset) ioError(id FileID, err error) error {
	f, _ := d.File(id)
	kind := ErrIO
	if errors.Is(err, source.ErrShort) || errors.Is(err, source.ErrCorrupt) || errors.Is(err, syscall.ENOENT) {
		kind = ErrCorrupt
	}
	return wrapf(kind, err, f.Name, f.Block, "%v", errorCause(err))
}

// errorCause returns what a source error says without the path (which the caller prints).
func errorCause(err error) string {
	var se *source.Error
	if errors.As(err, &se) {
		if se.Off >= 0 {
			return fmt.Sprintf("%s at offset %d: %v", se.Op, se.Off, se.Err)
		}
		return fmt.Sprintf("%s: %v", se.Op, se.Err)
	}
	return err.Error()
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

// BlockBytes returns the size of block b's data file (for windows, the rows its windows cover).
func (d *Dataset) BlockBytes(b int) uint64 {
	if w := d.win; w != nil {
		return uint64(((int64(d.BlockRecords(b))-1)*w.stride + w.length) * w.rowBytes)
	}
	return d.byteStart[b+1] - d.byteStart[b]
}

// RecordStride returns the distance in a block's data file from one fixed-size record to the
// next: the record size, or for windows the stride in bytes (windows overlap when it is
// smaller than the window).
func (d *Dataset) RecordStride() int64 {
	if w := d.win; w != nil {
		return w.stride * w.rowBytes
	}
	return d.RecordSize()
}

// SourceID returns the id of record local of block b when the dataset stores no ids: its
// storage index, or for windows its start row.
func (d *Dataset) SourceID(b int, local uint64) uint64 {
	if w := d.win; w != nil {
		return uint64(w.first[b] + int64(local)*w.stride)
	}
	return d.recStart[b] + local
}

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

// BlockIDs returns the source ids of block b's records, in storage order: its ids file read
// from src, or the records' storage indices when the dataset stores no ids.
func (d *Dataset) BlockIDs(ctx context.Context, src source.Blocks, b int) ([]uint64, error) {
	n := d.BlockRecords(b)
	ids := make([]uint64, n)
	if !d.HasIDs() {
		for i := range ids {
			ids[i] = d.SourceID(b, uint64(i))
		}
		return ids, nil
	}
	raw := make([]byte, 8*n)
	if err := src.Fill(ctx, IDsFile(b), 0, [][]byte{raw}); err != nil {
		return nil, d.ioError(IDsFile(b), err)
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
