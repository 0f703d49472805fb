package layout

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"syscall"

	"github.com/blockfs/blockfs/source"
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

// RoleOfFile returns the role of a block's file (data, ids or offsets).
func RoleOfFile(id FileID) Role { return Role(id % numRoles) }

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
	// Framed: the file is stored compressed (frames.go), Extent.Size bytes that hold Raw
	// bytes served.
	Framed bool
	Raw    int64
}

// ServedSize returns the bytes the file serves: Raw for a compressed file, else its size.
func (f *File) ServedSize() int64 {
	if f.Framed {
		return f.Raw
	}
	return f.Size
}

// Names returns the FileID of the names file, and whether the dataset has one.
func (d *Dataset) Names() (FileID, bool) {
	id := NamesFile(d.Blocks())
	return id, d.Manifest.Names != nil
}

// Dataset is an opened, validated dataset: its manifest, where each block's records start,
// and its shape (what the blocks' files are). It holds O(blocks) state, does no I/O after it
// is opened and is immutable, so it is safe for concurrent use. It implements source.Table;
// package source/local (or another backend) reads the files.
type Dataset struct {
	Dir      string
	Manifest *Manifest
	starts   recordStarts // shared with shape
	shape    shape
	// store is where the dataset was opened (nil for a file served in place and for shards
	// in place, whose backend is shardsBe); source/stack reads its files from there.
	store    Store
	shardsBe *ShardsBackend
	// framed: some of the dataset's files are compressed. below: the compressed pack that
	// windows are over (their rows are read uncompressed from it); nil otherwise.
	framed bool
	below  *Dataset
}

// shape is what a dataset's blocks are made of: the files of a pack (packed.go), ranges of
// one file served in place (flat.go), or windows over rows (windows.go). It answers each
// question whose answer depends on the shape, and Dataset delegates to it: a new shape (a
// mixture of datasets, records of several named fields) is one more implementation.
// Implementations are immutable after construction.
type shape interface {
	// file returns the table entry of id, and false for a file the dataset does not have.
	file(id FileID) (File, bool)
	// blockBytes returns the size of block b's data file.
	blockBytes(b int) uint64
	// recordStride returns the distance in a block's data file from one fixed-size record to
	// the next (0 for variable-length records).
	recordStride() int64
	// sourceID returns the id of record local of block b when the dataset stores no ids.
	sourceID(b int, local uint64) uint64
	// recordOffset returns where fixed-size record local of block b starts in the block's
	// data file; regular reports whether that is always local x recordStride.
	recordOffset(b int, local uint64) uint64
	regular() bool
	// verifiable returns nil when every file has a checksum to check as it is read, and
	// otherwise says why not (Verifiable: --verify's refusal).
	verifiable() error
	// where returns the data a mount point must not be inside: a directory, a file, a URL.
	where() string
	// inPlace returns the file served in place and where its records start, and false when
	// the data is not one file served in place.
	inPlace() (path string, offset int64, ok bool)
}

// recordStarts holds where each block's records start in storage order: block b holds
// records [r[b], r[b+1]); len = blocks+1.
type recordStarts []uint64

func (r recordStarts) blocks() int { return len(r) - 1 }

func (r recordStarts) records(b int) uint64 { return r[b+1] - r[b] }

// blockOf returns the block holding the record with storage index i, and its index there.
func (r recordStarts) blockOf(i uint64) (int, uint64) {
	b := sort.Search(r.blocks(), func(b int) bool { return r[b+1] > i })
	return b, i - r[b]
}

// blockData is file for a shape whose blocks have a data file and nothing else: the table
// entry of block b's data file, at the extent at(b) returns, and false for any other id.
func (r recordStarts) blockData(id FileID, at func(b int) source.Extent) (File, bool) {
	b := BlockOfFile(id)
	if b >= r.blocks() || Role(id%numRoles) != RoleData {
		return File{Block: -1}, false
	}
	return File{Extent: at(b), Role: RoleData, Block: b}, true
}

// inOrder is the part of a shape whose records are stored whole, one after another (a pack,
// a file in place): block b's data is bytes [byteStart[b], byteStart[b+1]) of the records,
// and a record's id, when none are stored, is its storage index. Fixed-size records need no
// byte table (starts times the record size).
type inOrder struct {
	starts     recordStarts
	byteStart  []uint64 // len = blocks+1; nil for fixed-size records
	recordSize int64    // 0 for variable-length records
}

func newInOrder(blocks int, recordSize int64) inOrder {
	s := inOrder{starts: make(recordStarts, blocks+1), recordSize: recordSize}
	if recordSize == 0 {
		s.byteStart = make([]uint64, blocks+1)
	}
	return s
}

func (s *inOrder) blockBytes(b int) uint64 {
	if s.byteStart == nil {
		return s.starts.records(b) * uint64(s.recordSize)
	}
	return s.byteStart[b+1] - s.byteStart[b]
}

func (s *inOrder) recordStride() int64 { return s.recordSize }

func (s *inOrder) sourceID(b int, local uint64) uint64 { return s.starts[b] + local }

func (s *inOrder) recordOffset(_ int, local uint64) uint64 { return local * uint64(s.recordSize) }

func (s *inOrder) regular() bool { return true }

// Store returns the Store the dataset was opened from (for windows, the pack's), whose Blocks
// read Stored()'s files as stored; nil for a file served in place or shards in place.
func (d *Dataset) Store() Store { return d.store }

// Stored returns the dataset whose files a backend reads for d: d itself, or for windows over
// a compressed pack the pack (the windows' files are ranges of its records, uncompressed).
func (d *Dataset) Stored() *Dataset {
	if d.below != nil {
		return d.below
	}
	return d
}

// Compressed reports whether some of the files Stored() reads are compressed.
func (d *Dataset) Compressed() bool { return d.Stored().framed }

// Compression returns how Stored()'s blocks are compressed, their data files' bytes as stored
// and their records' bytes; nil when none is.
func (d *Dataset) Compression() (c *Compression, stored, raw uint64) {
	m := d.Stored().Manifest
	if m.Compression == nil {
		return nil, 0, 0
	}
	stored, raw = StoredBytes(m)
	return m.Compression, stored, raw
}

// FramedFile says whether file id is compressed, and its bytes served.
func (d *Dataset) FramedFile(id FileID) (int64, bool) {
	f, _ := d.File(id)
	return f.Raw, f.Framed
}

// File returns the table entry of file id, and false for a file the dataset does not have.
func (d *Dataset) File(id FileID) (File, bool) { return d.shape.file(id) }

// Extent implements source.Table.
func (d *Dataset) Extent(id FileID) (source.Extent, bool) {
	f, ok := d.File(id)
	return f.Extent, ok
}

// Size returns the bytes file id serves (0 for a file the dataset does not have): a
// compressed file's uncompressed bytes.
func (d *Dataset) Size(id FileID) int64 {
	f, _ := d.File(id)
	return f.ServedSize()
}

// StoredSize returns the bytes file id takes where it is stored: a compressed file's
// compressed bytes, else Size. (For windows over a compressed pack, Stored().StoredSize.)
func (d *Dataset) StoredSize(id FileID) int64 {
	f, _ := d.File(id)
	return f.Size
}

// Path returns the absolute path of file id, for messages.
func (d *Dataset) Path(id FileID) string {
	f, _ := d.File(id)
	return f.Name
}

// Where returns the data a mount point must not be inside: the dataset's directory (or URL),
// or the file served in place.
func (d *Dataset) Where() string { return d.shape.where() }

// InPlace returns the file a dataset served in place reads and where its records start, and
// false for a packed dataset.
func (d *Dataset) InPlace() (path string, offset int64, ok bool) { return d.shape.inPlace() }

// Flat reports whether the dataset is one file served in place (no checksums, no ids).
func (d *Dataset) Flat() bool {
	_, _, ok := d.InPlace()
	return ok
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
func (d *Dataset) Blocks() int { return d.starts.blocks() }

// Records returns the number of records.
func (d *Dataset) Records() uint64 { return d.Manifest.Records }

// Bytes returns the total size of all records.
func (d *Dataset) Bytes() uint64 { return d.Manifest.Bytes }

// Kind returns the record kind.
func (d *Dataset) Kind() Kind { return d.Manifest.Kind }

// RecordSize returns the size of a fixed-size record, 0 for variable-length datasets.
func (d *Dataset) RecordSize() int64 { return d.Manifest.RecordSize }

// BlockRecords returns the number of records in block b.
func (d *Dataset) BlockRecords(b int) uint64 { return d.starts.records(b) }

// BlockBytes returns the size of block b's data file (for windows, the rows its windows cover).
func (d *Dataset) BlockBytes(b int) uint64 { return d.shape.blockBytes(b) }

// RecordStride returns the distance in a block's data file from one fixed-size record to the
// next: the record size, or for windows the stride in bytes (windows overlap when it is
// smaller than the window).
func (d *Dataset) RecordStride() int64 { return d.shape.recordStride() }

// RecordOffset returns where fixed-size record local of block b starts in the block's data
// file: local x RecordStride, but for windows of short segments that share a block (Regular
// false).
func (d *Dataset) RecordOffset(b int, local uint64) uint64 { return d.shape.recordOffset(b, local) }

// Regular reports whether every block's fixed-size records are RecordStride apart, so that a
// reader may place them with one multiplication (the view's run copiers). It is false only for
// windows of short segments that share blocks (layout.Windows).
func (d *Dataset) Regular() bool { return d.shape.regular() }

// SourceID returns the id of record local of block b when the dataset stores no ids: its
// storage index, or for windows its start row.
func (d *Dataset) SourceID(b int, local uint64) uint64 { return d.shape.sourceID(b, local) }

// BlockCounts returns the record count of every block, in storage order.
func (d *Dataset) BlockCounts() []uint64 {
	c := make([]uint64, d.Blocks())
	for b := range c {
		c[b] = d.BlockRecords(b)
	}
	return c
}

// FirstRecord returns the storage index of block b's first record.
func (d *Dataset) FirstRecord(b int) uint64 { return d.starts[b] }

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
	if err := src.Fill(ctx, IDsFile(b), 0, [][]byte{raw}, source.Read{}); err != nil {
		return nil, d.ioError(IDsFile(b), err)
	}
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(raw[8*i:])
	}
	return ids, nil
}

// BlockOf returns the block holding the record with storage index i, and its index in the block.
func (d *Dataset) BlockOf(i uint64) (int, uint64) { return d.starts.blockOf(i) }

// String summarizes the dataset in one line.
func (d *Dataset) String() string {
	return fmt.Sprintf("%s: %d %s records in %d blocks", d.Dir, d.Records(), d.Kind(), d.Blocks())
}
