package stack

import (
	"context"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
)

// subBlocks reads a Sub dataset's files from a source of its parent's.
type subBlocks struct {
	inner source.Blocks
	sub   *layout.Dataset
}

// Sub returns a source of sub's files (FileIDs of sub) that reads them from inner, a
// source of the files of the dataset sub is part of.
func Sub(inner source.Blocks, sub *layout.Dataset) source.Blocks { return &subBlocks{inner, sub} }

func (s *subBlocks) Size(id source.FileID) int64 {
	if layout.BlockOfFile(id) >= s.sub.Blocks() {
		return 0
	}
	return s.inner.Size(s.sub.ParentFile(id))
}

func (s *subBlocks) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	if layout.BlockOfFile(id) >= s.sub.Blocks() {
		return &source.Error{Op: "read", Name: "part file", Err: source.ErrNoFile}
	}
	return s.inner.Fill(ctx, s.sub.ParentFile(id), off, bufs, how)
}
