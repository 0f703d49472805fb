package layout

// Sub returns the dataset of some of d's blocks, in the order given (each at most once): a
// part of a node-aware mount (shuffle.PartBlocks). Its block i is d's block blocks[i], with
// that block's files, records and ids; it has no names file. ParentFile maps its FileIDs to
// d's (a source of d's files serves its through source/stack's Sub). O(len(blocks)); immutable.
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
	return &Dataset{Dir: d.Dir, Manifest: &m, starts: starts, store: d.store, framed: d.framed,
		shape: &subShape{parent: d, blocks: blocks}}
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
