package layout

import (
	"errors"

	"github.com/blockfs/blockfs/source"
)

// shardsShape is the shape of one field of shards served in place (shards.go): block b's data
// file is the field's values in a range of shard shardOf[b], which no backend reads as it is
// (source/stack's ShardsSource assembles it); its offsets file a range of the index's offsets file; and two
// kinds of FileID past the names file: block b's members (where each value starts in the
// shard) and the shards themselves, which the backends read.
type shardsShape struct {
	inOrder
	dir              string
	shards           []File  // by shard: the name a backend reads, size and identity
	shardOf          []int32 // by block
	crcs, offCRCs    []uint32
	memCRCs          []uint32
	offsets, members string // the index's files of this field
	offsetsID        source.Identity
	membersID        source.Identity
	// values is the index's file of the field's values when it stores them (a small field),
	// "" when they are read from the shards.
	values   string
	valuesID source.Identity
}

// MembersFile and ShardFile are the FileIDs of block b's members and of shard s in a dataset
// of shards in place of nb blocks.
func MembersFile(nb, b int) FileID { return NamesFile(nb) + 1 + FileID(b) }
func ShardFile(nb, s int) FileID   { return NamesFile(nb) + 1 + FileID(nb) + FileID(s) }

func (s *shardsShape) file(id FileID) (File, bool) {
	nb := s.starts.blocks()
	if id > NamesFile(nb) {
		i := int(id - NamesFile(nb) - 1)
		switch {
		case i < nb:
			return File{Extent: source.Extent{Name: s.members, Offset: 8 * int64(s.starts[i]), Size: 8 * int64(s.starts.records(i)), Ident: s.membersID},
				Role: RoleData, Block: i}, true
		case i-nb < len(s.shards):
			return s.shards[i-nb], true
		}
		return File{Block: -1}, false
	}
	b := BlockOfFile(id)
	if b >= nb {
		return File{Block: -1}, false
	}
	switch RoleOfFile(id) {
	case RoleData:
		if s.values != "" {
			id := s.valuesID
			id.CRC32C, id.HasCRC = s.crcs[b], true
			return File{Extent: source.Extent{Name: s.values, Offset: int64(s.byteStart[b]), Size: int64(s.blockBytes(b)), Ident: id},
				Role: RoleData, Block: b, CRC32C: s.crcs[b], HasCRC: true}, true
		}
		sh := s.shards[s.shardOf[b]]
		return File{Extent: source.Extent{Name: sh.Name, Size: int64(s.blockBytes(b)), Ident: source.Identity{CRC32C: s.crcs[b], HasCRC: true}},
			Role: RoleData, Block: b, CRC32C: s.crcs[b], HasCRC: true}, true
	case RoleOffsets:
		id := s.offsetsID
		id.CRC32C, id.HasCRC = s.offCRCs[b], true
		return File{Extent: source.Extent{Name: s.offsets, Offset: 8 * int64(s.starts[b]+uint64(b)), Size: 8 * int64(s.starts.records(b)+1), Ident: id},
			Role: RoleOffsets, Block: b, CRC32C: s.offCRCs[b], HasCRC: true}, true
	}
	return File{Block: -1}, false
}

func (s *shardsShape) verifiable() error { return nil }

func (s *shardsShape) where() string { return s.dir }

func (s *shardsShape) inPlace() (string, int64, bool) { return "", 0, false }

// ShardsInPlace reports whether the dataset is a field of shards served in place, whose data
// files no backend reads as they are: a source of source/stack assembles them (ShardsField).
func (d *Dataset) ShardsInPlace() bool {
	_, ok := d.shape.(*shardsShape)
	return ok
}

// ErrIndexOutOfStep is a shard's values that do not match their index's CRC32C: the shard
// changed since it was indexed (edited in place, its size and time kept).
var ErrIndexOutOfStep = errors.New("changed since it was indexed")

// ShardsField is what reading a field of shards in place needs of its dataset beyond its file
// table: where each block's values are, the index's checksums of their places, and the
// backend the dataset was opened with. Immutable.
type ShardsField struct {
	s  *shardsShape
	be ShardsBackend
}

// ShardsField returns d's ShardsField, and false for a dataset that is not a field of shards
// in place.
func (d *Dataset) ShardsField() (ShardsField, bool) {
	s, ok := d.shape.(*shardsShape)
	if !ok {
		return ShardsField{}, false
	}
	return ShardsField{s: s, be: *d.shardsBe}, true
}

// Backend returns the backend the field was opened with (OpenShards).
func (f ShardsField) Backend() ShardsBackend { return f.be }

// Shard returns the FileID of the shard that holds block b's values, and its size.
func (f ShardsField) Shard(b int) (FileID, int64) {
	k := int(f.s.shardOf[b])
	return ShardFile(f.s.starts.blocks(), k), f.s.shards[k].Size
}

// IndexCRCs returns the index's CRC32Cs of block b's offsets and members.
func (f ShardsField) IndexCRCs(b int) (offsets, members uint32) {
	return f.s.offCRCs[b], f.s.memCRCs[b]
}

// ValuesInIndex reports whether the index stores the field's values (a small field), which
// are then read from it, not from the shards.
func (f ShardsField) ValuesInIndex() bool { return f.s.values != "" }

// IndexPath returns the index's offsets file of the field, for messages.
func (f ShardsField) IndexPath() string { return f.s.offsets }
