package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"slices"

	"github.com/blockfs/blockfs/internal/strictjson"
	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/source"
)

// Shards served in place (docs/FORMAT.md, "Shards in place"): WebDataset tar shards or
// TFRecord files, read where they are through an index that blockfs index writes into a
// directory of its own. A block is a member-aligned range of one shard; field NAME's block is
// the concatenation of that field's values in the range, which the index places: for each
// record, where its value starts in the shard (fields/NAME.members) and, per block, the value
// offsets as a packed block's offsets file (fields/NAME.offsets). Nothing is copied: the
// source of source/stack reads each value from its shard.

// IndexName is the index manifest's name in an index directory. blockfs index writes it last.
const IndexName = "blockfs-index.json"

// IndexFormat and IndexVersion identify the index format.
const (
	IndexFormat  = "blockfs-index"
	IndexVersion = 1
)

// MaxIndexManifest bounds the index manifest read (about 40 bytes a block, a few more a field).
const MaxIndexManifest = 1 << 28

// ShardsIndex is the JSON document at IndexName.
type ShardsIndex struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Input is the shards' format: "webdataset" or "tfrecord".
	Input string `json:"input"`
	// Source is where the shards are: an absolute directory or an s3:// URL prefix; each
	// shard's name is relative to it.
	Source  string   `json:"source"`
	Records uint64   `json:"records"`
	Fields  []string `json:"fields"`
	// Stored names the fields whose values the index holds (fields/NAME.values), small ones
	// (a label), read from there rather than from between the shards' other members.
	Stored []string `json:"stored,omitempty"`
	// FillMissing: a sample that lacks a field has an empty value (index --fill-missing).
	FillMissing bool `json:"fill_missing,omitempty"`
	// Of is, in the index of a part (blockfs index --part), what the part is a part of; nil in
	// a whole (or merged) index.
	Of     *IndexWhole  `json:"of,omitempty"`
	Shards []IndexShard `json:"shards"`
	Blocks []IndexBlock `json:"blocks"`
}

// IndexWhole is what a part's index was a part of: every shard's count and bytes, when it was
// made. A merge refuses parts that saw other shards (a shard added or changed between parts
// would otherwise be indexed twice or not at all).
type IndexWhole struct {
	Shards int   `json:"shards"`
	Bytes  int64 `json:"bytes"`
}

// IndexShard is one shard as it was indexed: a regular file or an object, and what identifies
// its bytes (its size and a local file's modification time, or an object's ETag).
type IndexShard struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns,omitempty"`
	ETag    string `json:"etag,omitempty"`
}

// IndexBlock is one block: a run of samples of one shard, and for each field (in Fields'
// order) the bytes of its values and their CRC32C, summed as one pack would sum the block's
// data file.
type IndexBlock struct {
	Shard   int      `json:"shard"`
	Records uint64   `json:"records"`
	Bytes   []uint64 `json:"bytes"`
	CRC32C  []uint32 `json:"crc32c"`
	// OffsetsCRC32C is the CRC32C of each field's offsets of the block in its offsets file.
	OffsetsCRC32C []uint32 `json:"offsets_crc32c"`
	// MembersCRC32C is the CRC32C of each field's starts of the block in its members file.
	MembersCRC32C []uint32 `json:"members_crc32c"`
}

// minSampleBytes is the least a sample takes of a shard: a TFRecord record's framing (a tar
// member's header is 512 bytes). A block of more samples than its shard's size allows is
// refused, so that no count in the index can overflow what it sizes.
const minSampleBytes = 16

// MaxIndexBlockRecords bounds the samples of a block of an index of shards: blockfs index
// cuts a block there whatever its bytes (a shard of empty records made one block of 2^26
// samples, whose offsets the mount read whole), and a mount refuses an index with more.
const MaxIndexBlockRecords = 1 << 20

// IndexOffsetsFile and IndexMembersFile are field name's files in an index directory.
func IndexOffsetsFile(name string) string { return "fields/" + name + ".offsets" }
func IndexValuesFile(name string) string  { return "fields/" + name + ".values" }
func IndexMembersFile(name string) string { return "fields/" + name + ".members" }

// IsShardsIndex reports whether dir holds an index of shards served in place.
func IsShardsIndex(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, IndexName))
	return err == nil && st.Mode().IsRegular()
}

// ReadShardsIndex reads and validates the index manifest in dir.
func ReadShardsIndex(dir string) (*ShardsIndex, error) {
	path := filepath.Join(dir, IndexName)
	raw, err := userfile.ReadFile(path, MaxIndexManifest)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrFormat, dir, -1, "no %s (not an index of shards: make one with blockfs index SHARDS %s)", IndexName, dir)
		}
		return nil, PathError(ErrFormat, path, err)
	}
	var ix ShardsIndex
	if err := strictjson.Decode(raw, &ix); err != nil {
		return nil, errorf(ErrFormat, path, -1, "not a valid index (%v); make it again with blockfs index", err)
	}
	if err := ix.Validate(path); err != nil {
		return nil, err
	}
	return &ix, nil
}

// Validate checks the index's internal consistency; path names it in messages.
func (ix *ShardsIndex) Validate(path string) error {
	bad := func(format string, args ...any) error {
		return errorf(ErrFormat, path, -1, format+"; make the index again with blockfs index", args...)
	}
	if ix.Format != IndexFormat || ix.Version != IndexVersion {
		return errorf(ErrFormat, path, -1, "format %q version %d; this blockfs reads %s version %d", ix.Format, ix.Version, IndexFormat, IndexVersion)
	}
	if ix.Input != "webdataset" && ix.Input != "tfrecord" {
		return bad("input %q is neither webdataset nor tfrecord", ix.Input)
	}
	if len(ix.Fields) == 0 || len(ix.Fields) > 1024 || len(ix.Shards) == 0 || len(ix.Blocks) == 0 || len(ix.Blocks) > MaxBlocks {
		return bad("%d fields, %d shards, %d blocks", len(ix.Fields), len(ix.Shards), len(ix.Blocks))
	}
	seen := map[string]bool{}
	for _, name := range ix.Fields {
		if err := checkFieldName(name); err != nil || seen[name] {
			return bad("field %q is not a valid, unique field name", name)
		}
		seen[name] = true
	}
	for _, name := range ix.Stored {
		if !seen[name] {
			return bad("stored field %q is not a field", name)
		}
		seen[name] = false
	}
	clear(seen)
	for i, sh := range ix.Shards {
		if err := checkRelPath(sh.Name); err != nil || seen[sh.Name] || sh.Size <= 0 {
			return bad("shard %d %q: a unique relative name and a size are needed", i, sh.Name)
		}
		seen[sh.Name] = true
	}
	var records uint64
	bytes := make([]uint64, len(ix.Fields))
	for i, b := range ix.Blocks {
		if b.Records > MaxIndexBlockRecords {
			return bad("block %d holds %d samples, more than the %d a block may", i, b.Records, MaxIndexBlockRecords)
		}
		if b.Shard < 0 || b.Shard >= len(ix.Shards) || (i > 0 && b.Shard < ix.Blocks[i-1].Shard) || b.Records == 0 ||
			b.Records > uint64(ix.Shards[b.Shard].Size)/minSampleBytes ||
			len(b.Bytes) != len(ix.Fields) || len(b.CRC32C) != len(ix.Fields) ||
			len(b.OffsetsCRC32C) != len(ix.Fields) || len(b.MembersCRC32C) != len(ix.Fields) {
			return bad("block %d is not a run of samples of one shard, in shard order", i)
		}
		for j, n := range b.Bytes {
			if n > uint64(ix.Shards[b.Shard].Size) || n > MaxBlockBytes {
				return bad("block %d: field %q has %d bytes, more than its shard", i, ix.Fields[j], n)
			}
			bytes[j] += n
		}
		var carry uint64
		if records, carry = bits.Add64(records, b.Records, 0); carry != 0 {
			return bad("record counts overflow")
		}
	}
	if records != ix.Records {
		return bad("blocks hold %d records but the index says %d", records, ix.Records)
	}
	return nil
}

// ShardsBackend is where a dataset of shards in place reads its bytes: Index reads the index's
// own files (a local directory) and Shards the shards (local files or an object store), each
// through a Table; Locate returns the name a backend reads shard rel by and its identity now,
// an error if it is gone, or not a regular file or object.
type ShardsBackend struct {
	Index  func(t source.Table) source.Blocks
	Shards func(t source.Table) source.Blocks
	Locate func(rel string) (name string, id source.Identity, err error)
	// Aligned: Shards reads with O_DIRECT a request whose offset, length and buffer are
	// page-aligned; long runs of values are then read so.
	Aligned bool
}

// OpenShards opens the index ix (ReadShardsIndex of dir) and returns the dataset with fields it
// describes: its fields manifest and one dataset per field, each reading through be. Each shard must still
// be what the index says (its size, and its modification time or ETag), and the index's files
// their sizes: an index made for other bytes is refused.
func OpenShards(dir string, ix *ShardsIndex, be ShardsBackend) (*FieldsManifest, []*Dataset, error) {
	var err error
	shards := make([]File, len(ix.Shards))
	for i, sh := range ix.Shards {
		name, id, err := be.Locate(sh.Name)
		if err != nil {
			return nil, nil, errorf(ErrCorrupt, dir, -1, "shard %s: %v (the index is for shards that are no longer there: make it again with blockfs index)", sh.Name, err)
		}
		if why := shardChanged(sh, id); why != "" {
			return nil, nil, errorf(ErrCorrupt, dir, -1, "shard %s %s since it was indexed: make the index again with blockfs index", sh.Name, why)
		}
		shards[i] = File{Extent: source.Extent{Name: name, Size: sh.Size, Ident: id}, Role: RoleData, Block: -1}
	}
	man := &FieldsManifest{Format: FieldsFormat, Version: FieldsVersion, Records: ix.Records, Source: ix.Source}
	dss := make([]*Dataset, len(ix.Fields))
	for j, name := range ix.Fields {
		man.Fields = append(man.Fields, Field{Name: name, Kind: Variable, Dir: FieldDir(name)})
		if dss[j], err = openShardsField(dir, ix, j, shards, be); err != nil {
			return nil, nil, err
		}
	}
	return man, dss, nil
}

// shardChanged says how a shard's identity now differs from the index's, or "".
func shardChanged(sh IndexShard, id source.Identity) string {
	switch {
	case id.Size != sh.Size:
		return fmt.Sprintf("is %d bytes, %d", id.Size, sh.Size)
	case sh.ETag != "" && id.Tag != sh.ETag:
		return fmt.Sprintf("has ETag %s, %s", id.Tag, sh.ETag)
	case sh.ETag == "" && id.MtimeNs != sh.MtimeNs:
		return "was modified"
	}
	return ""
}

// openShardsField builds field j's dataset: its manifest (as pack writes a field's), its
// blocks' extents in the index files, and its source.
func openShardsField(dir string, ix *ShardsIndex, j int, shards []File, be ShardsBackend) (*Dataset, error) {
	name := ix.Fields[j]
	nb := len(ix.Blocks)
	m := &Manifest{Format: FormatName, Version: Version, Kind: Variable, Records: ix.Records, Source: ix.Source,
		Blocks: make([]BlockEntry, nb), Extra: map[string]any{"in_place": ix.Input, "field": name}}
	sh := &shardsShape{inOrder: newInOrder(nb, 0), dir: dir, shards: shards, shardOf: make([]int32, nb),
		crcs: make([]uint32, nb), offCRCs: make([]uint32, nb), memCRCs: make([]uint32, nb)}
	for b, blk := range ix.Blocks {
		sh.starts[b+1] = sh.starts[b] + blk.Records
		sh.byteStart[b+1] = sh.byteStart[b] + blk.Bytes[j]
		sh.shardOf[b], sh.crcs[b], sh.offCRCs[b], sh.memCRCs[b] = int32(blk.Shard), blk.CRC32C[j], blk.OffsetsCRC32C[j], blk.MembersCRC32C[j]
		m.Blocks[b] = BlockEntry{File: ix.Shards[blk.Shard].Name, Records: blk.Records, Bytes: blk.Bytes[j], CRC32C: blk.CRC32C[j],
			OffsetsFile: IndexOffsetsFile(name), OffsetsCRC32C: blk.OffsetsCRC32C[j]}
		m.Bytes += blk.Bytes[j]
	}
	sh.offsets = filepath.Join(dir, filepath.FromSlash(IndexOffsetsFile(name)))
	sh.members = filepath.Join(dir, filepath.FromSlash(IndexMembersFile(name)))
	files := []struct {
		path string
		want int64
		id   *source.Identity
	}{{sh.offsets, 8 * int64(ix.Records+uint64(nb)), &sh.offsetsID}, {sh.members, 8 * int64(ix.Records), &sh.membersID}}
	if slices.Contains(ix.Stored, name) {
		sh.values = filepath.Join(dir, filepath.FromSlash(IndexValuesFile(name)))
		files = append(files, struct {
			path string
			want int64
			id   *source.Identity
		}{sh.values, int64(m.Bytes), &sh.valuesID})
	}
	for _, f := range files {
		st, err := os.Stat(f.path)
		if err != nil || !st.Mode().IsRegular() || st.Size() != f.want {
			return nil, errorf(ErrCorrupt, dir, -1, "field %q: %s is missing or not %d bytes (a damaged index): make it again with blockfs index", name, f.path, f.want)
		}
		*f.id = FileIdentity(st)
	}
	return &Dataset{Dir: dir, Manifest: m, starts: sh.starts, shape: sh, shardsBe: &be}, nil
}
