package layout

import (
	"context"

	"github.com/blockfs/blockfs/source"
)

// Sub returns the dataset of some of d's blocks, in the order given (each at most once): a
// part of a node-aware mount (shuffle.PartBlocks). Its block i is d's block blocks[i], with
// that block's files, records and ids; it has no names file. ParentFile maps its FileIDs to
// d's, and its Source reads d's. O(len(blocks)); immutable.
func (d *Dataset) Sub(blocks []int) *Dataset {
	m := *d.Manifest
	m.Names, m.Records, m.Bytes = nil, 0, 0
	full := len(d.Manifest.Blocks) == d.Blocks()
	if full {
		m.Blocks = make([]BlockEntry, len(blocks))
	}
	starts := make(recordStarts, len(blocks)+1)
	for i, b := range blocks {
		n := d.BlockRecords(b)
		starts[i+1] = starts[i] + n
		m.Records += n
		m.Bytes += d.BlockBytes(b)
		if full {
			m.Blocks[i] = d.Manifest.Blocks[b]
		}
	}
	sub := &Dataset{Dir: d.Dir, Manifest: &m, starts: starts, store: d.store,
		shape: &subShape{parent: d, blocks: blocks}}
	if d.src != nil {
		sub.src = SubBlocks(d.src, sub)
	}
	if d.framed && d.stored != nil {
		// Its files as stored are its parent's: a stack over them serves them decompressed.
		sub.framed, sub.stored = true, SubBlocks(d.stored, sub)
	}
	return sub
}

// ParentFile returns the FileID in the dataset Sub was called on of file id of a dataset Sub
// returned; id itself for any other dataset.
func (d *Dataset) ParentFile(id FileID) FileID {
	s, ok := d.shape.(*subShape)
	if !ok {
		return id
	}
	return RoleFile(s.blocks[BlockOfFile(id)], RoleOfFile(id))
}

// subShape is a Sub dataset's shape: its parent's, block by block.
type subShape struct {
	parent *Dataset
	blocks []int
}

func (s *subShape) file(id FileID) (File, bool) {
	b := BlockOfFile(id)
	if b >= len(s.blocks) {
		return File{Block: -1}, false
	}
	f, ok := s.parent.File(RoleFile(s.blocks[b], RoleOfFile(id)))
	f.Block = b
	return f, ok
}

func (s *subShape) blockBytes(b int) uint64 { return s.parent.BlockBytes(s.blocks[b]) }
func (s *subShape) recordStride() int64     { return s.parent.RecordStride() }
func (s *subShape) sourceID(b int, local uint64) uint64 {
	return s.parent.SourceID(s.blocks[b], local)
}
func (s *subShape) recordOffset(b int, local uint64) uint64 {
	return s.parent.RecordOffset(s.blocks[b], local)
}
func (s *subShape) regular() bool                  { return s.parent.Regular() }
func (s *subShape) verifiable() error              { return s.parent.shape.verifiable() }
func (s *subShape) where() string                  { return s.parent.Where() }
func (s *subShape) inPlace() (string, int64, bool) { return s.parent.InPlace() }

// subBlocks reads a Sub dataset's files from a source of its parent's.
type subBlocks struct {
	inner source.Blocks
	sub   *Dataset
}

// SubBlocks returns a source of sub's files (FileIDs of sub) that reads them from inner, a
// source of the files of the dataset sub is part of.
func SubBlocks(inner source.Blocks, sub *Dataset) source.Blocks { return &subBlocks{inner, sub} }

func (s *subBlocks) Size(id FileID) int64 {
	if BlockOfFile(id) >= s.sub.Blocks() {
		return 0
	}
	return s.inner.Size(s.sub.ParentFile(id))
}

func (s *subBlocks) Fill(ctx context.Context, id FileID, off int64, bufs [][]byte, how source.Read) error {
	if BlockOfFile(id) >= s.sub.Blocks() {
		return &source.Error{Op: "read", Name: "part file", Err: source.ErrNoFile}
	}
	return s.inner.Fill(ctx, s.sub.ParentFile(id), off, bufs, how)
}
