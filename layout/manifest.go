package layout

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path"
	"strings"

	"github.com/blockfs/blockfs/internal/strictjson"
)

// ManifestName is the manifest's file name inside a dataset directory. Writers create it last,
// so its presence means the dataset is complete.
const ManifestName = "blockfs.json"

// FormatName and Version identify the on-disk format described in docs/FORMAT.md. A dataset
// with compressed blocks is VersionCompressed, so that a blockfs from before them refuses it
// rather than serve its compressed bytes as records; every other dataset stays Version.
const (
	FormatName        = "blockfs-dataset"
	Version           = 1
	VersionCompressed = 2
)

// Limits that keep a manifest's numbers sane. They are far above any real dataset.
const (
	MaxManifestBytes = 1 << 30 // 1 GiB of JSON is about 5 million blocks
	MaxRecordSize    = 1 << 30
	MaxBlockBytes    = 1 << 34 // 16 GiB
	// MaxBlockRecords bounds the records of a block of variable-length records: a mount reads
	// a block's offsets index whole (8 bytes a record, 128 MiB at the bound) into its own
	// memory. pack cuts blocks there; an index of shards at MaxIndexBlockRecords.
	MaxBlockRecords = 1 << 24
)

// Kind says how records are delimited.
type Kind string

const (
	Fixed    Kind = "fixed"    // every record is RecordSize bytes
	Variable Kind = "variable" // each block carries an offsets index
)

// Manifest is the JSON document at ManifestName. Field order and meaning are documented in
// docs/FORMAT.md; all fields are immutable once written.
type Manifest struct {
	Format     string      `json:"format"`
	Version    int         `json:"version"`
	Kind       Kind        `json:"kind"`
	RecordSize int64       `json:"record_size,omitempty"`
	Records    uint64      `json:"records"`
	Bytes      uint64      `json:"bytes"`
	DType      string      `json:"dtype,omitempty"`
	Shape      []int64     `json:"shape,omitempty"`
	IDs        bool        `json:"ids"`
	PreShuffle PreShuffle  `json:"preshuffle"`
	Source     string      `json:"source,omitempty"`
	Names      *NamesEntry `json:"names,omitempty"`
	// Compression, when set, says how the blocks with stored_bytes are compressed.
	Compression *Compression   `json:"compression,omitempty"`
	Blocks      []BlockEntry   `json:"blocks"`
	Extra       map[string]any `json:"extra,omitempty"`
}

// PreShuffle records how pack assigned records to blocks.
type PreShuffle struct {
	Shuffled bool   `json:"shuffled"`
	Seed     uint64 `json:"seed"`
}

// NamesEntry describes the names file: the source name (relative path) of every record, one
// per line in source order, each ended by '\n'.
type NamesEntry struct {
	File   string `json:"file"`
	Bytes  uint64 `json:"bytes"`
	CRC32C uint32 `json:"crc32c"`
}

// BlockEntry describes one block. Paths are relative to the dataset directory, '/'-separated.
type BlockEntry struct {
	File          string `json:"file"`
	Records       uint64 `json:"records"`
	Bytes         uint64 `json:"bytes"`
	CRC32C        uint32 `json:"crc32c"`
	IDsFile       string `json:"ids_file,omitempty"`
	IDsCRC32C     uint32 `json:"ids_crc32c,omitempty"`
	OffsetsFile   string `json:"offsets_file,omitempty"`
	OffsetsCRC32C uint32 `json:"offsets_crc32c,omitempty"`
	// StoredBytes, when set (a dataset with Compression), is the size of the block's data
	// file, compressed (frames.go): Bytes stays the records' bytes, CRC32C is the file's.
	StoredBytes uint64 `json:"stored_bytes,omitempty"`
}

// Compression describes a dataset's compressed blocks: the codec ("zstd"), the level pack
// used (informative) and the uncompressed bytes of every frame but a block's last.
type Compression struct {
	Codec string `json:"codec"`
	Level int    `json:"level"`
	Frame int64  `json:"frame"`
}

// Codecs pack writes and a mount reads.
const CodecZstd = "zstd"

// MaxFrame bounds a frame's uncompressed bytes (what a decoder may allocate for one).
const MaxFrame = 64 << 20

// StoredBytes returns the bytes of m's block data files as stored, and the records' bytes.
func StoredBytes(m *Manifest) (stored, raw uint64) {
	for _, b := range m.Blocks {
		stored += b.Stored()
	}
	return stored, m.Bytes
}

// Stored returns the size of block b's data file as stored: StoredBytes for a compressed
// block, else Bytes.
func (b *BlockEntry) Stored() uint64 {
	if b.StoredBytes != 0 {
		return b.StoredBytes
	}
	return b.Bytes
}

// ParseManifest decodes and validates a manifest without touching any other file. name is
// used in error messages. It checks everything that can be checked from the JSON alone.
func ParseManifest(name string, data []byte) (*Manifest, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errorf(ErrFormat, name, -1, "manifest is empty (an interrupted pack? pack the dataset again)")
	}
	var m Manifest
	if err := strictjson.Decode(data, &m); err != nil {
		if se := (*strictjson.Error)(nil); errors.As(err, &se) {
			// Trailing data, or a key twice: encoding/json would take the last silently.
			return nil, errorf(ErrFormat, name, -1, "manifest has %v; pack the dataset again", se)
		}
		return nil, errorf(ErrFormat, name, -1, "manifest is not valid JSON (%v); pack the dataset again", err)
	}
	if err := m.Validate(name); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the manifest's internal consistency. name is used in error messages.
func (m *Manifest) Validate(name string) error {
	bad := func(format string, args ...any) error { return errorf(ErrFormat, name, -1, format, args...) }
	if err := m.validateKind(bad); err != nil {
		return err
	}
	if m.Records == 0 || len(m.Blocks) == 0 {
		return bad("dataset has no records")
	}
	if err := m.validateElement(name); err != nil {
		return err
	}
	var records, total uint64
	seen := make(map[string]int, len(m.Blocks)*2)
	if m.Names != nil {
		if err := checkRelPath(m.Names.File); err != nil {
			return errorf(ErrUnsafePath, name, -1, "names file %q: %v", m.Names.File, err)
		}
		seen[m.Names.File] = -1
	}
	for i, b := range m.Blocks {
		if err := m.validateBlock(name, i, b, seen); err != nil {
			return err
		}
		var carry uint64
		records, carry = bits.Add64(records, b.Records, 0)
		if carry != 0 {
			return bad("record counts overflow")
		}
		total, carry = bits.Add64(total, b.Bytes, 0)
		if carry != 0 {
			return bad("byte counts overflow")
		}
	}
	if records != m.Records {
		return bad("blocks hold %d records but the manifest says %d", records, m.Records)
	}
	if total != m.Bytes {
		return bad("blocks hold %d bytes but the manifest says %d", total, m.Bytes)
	}
	return nil
}

// validateKind checks the manifest's format, version, record kind and record size; bad makes
// the error.
func (m *Manifest) validateKind(bad func(format string, args ...any) error) error {
	if m.Format != FormatName {
		return bad("not a blockfs manifest (format %q, want %q)", m.Format, FormatName)
	}
	if m.Version != Version && m.Version != VersionCompressed {
		return bad("unknown format version %d (this blockfs reads versions %d and %d); upgrade blockfs or re-pack", m.Version, Version, VersionCompressed)
	}
	if err := m.validateCompression(bad); err != nil {
		return err
	}
	switch m.Kind {
	case Fixed:
		if m.RecordSize <= 0 {
			return bad("record_size must be positive for fixed-size records, got %d", m.RecordSize)
		}
		if m.RecordSize > MaxRecordSize {
			return bad("record_size %d exceeds the limit of %d", m.RecordSize, MaxRecordSize)
		}
	case Variable:
		if m.RecordSize != 0 {
			return bad("record_size must be absent for variable-length records, got %d", m.RecordSize)
		}
	default:
		return bad("unknown record kind %q (want %q or %q)", m.Kind, Fixed, Variable)
	}
	return nil
}

// validateBlock checks block i, b, of the manifest name: its size and files, each path safe
// and used once (seen maps the paths of the blocks before to their block, and gets b's).
func (m *Manifest) validateBlock(name string, i int, b BlockEntry, seen map[string]int) error {
	blk := func(format string, args ...any) error { return errorf(ErrFormat, name, i, format, args...) }
	if b.Records == 0 {
		return blk("block has no records")
	}
	if b.Bytes > MaxBlockBytes {
		return blk("block of %d bytes exceeds the limit of %d", b.Bytes, uint64(MaxBlockBytes))
	}
	if b.StoredBytes != 0 {
		if m.Compression == nil {
			return blk("stored_bytes is only for a dataset with compression")
		}
		least := uint64(FramesHeaderSize(int64(b.Bytes), m.Compression.Frame))
		if b.StoredBytes < least || b.StoredBytes > least+FramesBound(int64(b.Bytes), m.Compression.Frame) {
			return blk("stored_bytes %d is not what %d bytes in frames of %d compress to (%d to %d)",
				b.StoredBytes, b.Bytes, m.Compression.Frame, least, least+FramesBound(int64(b.Bytes), m.Compression.Frame))
		}
	}
	if m.Kind == Fixed {
		hi, lo := bits.Mul64(b.Records, uint64(m.RecordSize))
		if hi != 0 || lo != b.Bytes {
			return blk("%d records of %d bytes do not make %d bytes", b.Records, m.RecordSize, b.Bytes)
		}
		if b.OffsetsFile != "" {
			return blk("offsets_file is only for variable-length records")
		}
	} else if b.OffsetsFile == "" {
		return blk("variable-length block needs an offsets_file")
	} else if b.Records > MaxBlockRecords {
		return blk("block of %d records: a mount reads a block's offsets index whole, and allows at most %d records a block; pack it again with this blockfs", b.Records, MaxBlockRecords)
	}
	if m.IDs != (b.IDsFile != "") {
		if m.IDs {
			return blk("manifest says ids are stored but the block has no ids_file")
		}
		return blk("block has an ids_file but the manifest says ids are not stored")
	}
	for _, p := range b.paths() {
		if err := checkRelPath(p); err != nil {
			return errorf(ErrUnsafePath, name, i, "path %q: %v", p, err)
		}
		if j, dup := seen[p]; dup {
			return blk("path %q is already used by block %d", p, j)
		}
		seen[p] = i
	}
	return nil
}

// validateCompression checks the compression entry against the version: a compressed
// dataset is version 2, with a known codec and a frame size that is a multiple of 4096 up to
// MaxFrame.
func (m *Manifest) validateCompression(bad func(format string, args ...any) error) error {
	c := m.Compression
	switch {
	case c == nil && m.Version == VersionCompressed:
		return bad("format version %d is for compressed blocks, and the manifest has no compression", m.Version)
	case c == nil:
		return nil
	case m.Version != VersionCompressed:
		return bad("compressed blocks need format version %d, the manifest says %d", VersionCompressed, m.Version)
	case c.Codec != CodecZstd:
		return bad("unknown compression codec %q (this blockfs reads %q); upgrade blockfs or re-pack", c.Codec, CodecZstd)
	case c.Frame <= 0 || c.Frame%4096 != 0 || c.Frame > MaxFrame:
		return bad("compression frame %d is not a multiple of 4096 from 4096 to %d", c.Frame, MaxFrame)
	}
	return nil
}

// validateElement checks dtype and shape: both or neither, and for fixed records their product
// must be the record size.
func (m *Manifest) validateElement(name string) error {
	if m.DType == "" {
		if len(m.Shape) > 0 {
			return errorf(ErrFormat, name, -1, "shape given without dtype")
		}
		return nil
	}
	item, err := DTypeSize(m.DType)
	if err != nil {
		return errorf(ErrFormat, name, -1, "%v", err)
	}
	elems := int64(1)
	for _, d := range m.Shape {
		if d < 0 {
			return errorf(ErrFormat, name, -1, "shape %v has a negative dimension", m.Shape)
		}
		if d != 0 && elems > math.MaxInt64/d {
			return errorf(ErrFormat, name, -1, "shape %v is too large", m.Shape)
		}
		elems *= d
	}
	if m.Kind == Fixed && (elems > m.RecordSize/item || elems*item != m.RecordSize) {
		return errorf(ErrFormat, name, -1, "dtype %s with shape %v is not %d bytes per record", m.DType, m.Shape, m.RecordSize)
	}
	return nil
}

// checkRelPath accepts only clean, relative, '/'-separated paths that stay inside the directory.
func checkRelPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("absolute paths are not allowed")
	case strings.Contains(p, "\\") || strings.ContainsRune(p, 0):
		return fmt.Errorf("backslashes and NUL are not allowed")
	case path.Clean(p) != p:
		return fmt.Errorf("path is not clean (want %q)", path.Clean(p))
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("path leaves the dataset directory")
	case p == "." || p == ManifestName:
		return fmt.Errorf("path does not name a block file")
	}
	return nil
}

// paths lists the files a block entry names: the data file first, then the ids and offsets
// files when present.
func (b *BlockEntry) paths() []string {
	ps := []string{b.File}
	for _, p := range []string{b.IDsFile, b.OffsetsFile} {
		if p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}
