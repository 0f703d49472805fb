package stack

import (
	"context"
	"fmt"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
)

// rowsBlocks serves the files of windows over a compressed pack (Stack.served): block b's
// data file is the rows from its first window's start to its last window's end, read from
// src, the pack's files uncompressed, block file by block file. Safe for concurrent use.
type rowsBlocks struct {
	w    *layout.Dataset // the windows
	rows *layout.Dataset // the pack
	src  source.Blocks
}

// Size implements source.Blocks.
func (r *rowsBlocks) Size(id source.FileID) int64 { return r.w.Size(id) }

// Fill implements source.Blocks: the bytes [off, off+len) of window block id's rows, from the
// pack's blocks that hold them.
func (r *rowsBlocks) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	f, ok := r.w.File(id)
	n := int64(source.Len(bufs))
	if !ok || off < 0 || off+n > f.Size {
		return &source.Error{Op: "read", Name: r.w.Dir, Off: off, Err: source.ErrNoFile}
	}
	rs := r.rows.RecordSize()
	first, _ := r.w.WindowsFirstRow(f.Block)
	at := first*rs + off // the rows' byte position in the pack
	for done := int64(0); done < n; {
		b, _ := r.rows.BlockOf(uint64(at / rs))
		skip := at - int64(r.rows.FirstRecord(b))*rs
		k := min(int64(r.rows.BlockBytes(b))-skip, n-done)
		if k <= 0 {
			return fmt.Errorf("windows: rows at byte %d are past block %d of the pack", at, b)
		}
		if err := r.src.Fill(ctx, layout.DataFile(b), skip, source.SliceBufs(bufs, done, done+k), how); err != nil {
			return err
		}
		done, at = done+k, at+k
	}
	return nil
}
