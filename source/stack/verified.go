package stack

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
)

// Verified is a source.Blocks that checks each file's CRC32C the first time any of it is read
// (blockfs mount --verify): a file that fails gives an error for every read, so its bytes
// never reach the cache. Safe for concurrent use; O(files) bits of state.
type Verified struct {
	ds    *layout.Dataset
	src   source.Blocks
	ok    []atomic.Bool
	locks [64]sync.Mutex // striped by source.FileID, so one file is checked once at a time
}

// NewVerified returns src with checksums checked, or an error if ds has no checksums.
func NewVerified(ds *layout.Dataset, src source.Blocks) (*Verified, error) {
	if err := ds.Verifiable(); err != nil {
		return nil, err
	}
	return &Verified{ds: ds, src: src, ok: make([]atomic.Bool, int(layout.NamesFile(ds.Blocks()))+1)}, nil
}

// Size implements source.Blocks.
func (v *Verified) Size(id source.FileID) int64 { return v.src.Size(id) }

// Fill implements source.Blocks: it checks file id (once) and then reads from it.
func (v *Verified) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	if err := v.check(ctx, id, how); err != nil {
		return err
	}
	return v.src.Fill(ctx, id, off, bufs, how)
}

// check returns nil once file id has matched its CRC32C; until then it checks it (a failure
// is not remembered, so a repaired file passes later).
func (v *Verified) check(ctx context.Context, id source.FileID, how source.Read) error {
	if id >= source.FileID(len(v.ok)) {
		return &source.Error{Op: "read", Name: v.ds.Dir, Off: -1, Err: source.ErrNoFile}
	}
	if v.ok[id].Load() {
		return nil
	}
	mu := &v.locks[id%source.FileID(len(v.locks))]
	mu.Lock()
	defer mu.Unlock()
	if v.ok[id].Load() {
		return nil
	}
	if err := v.ds.CheckCRC(ctx, v.src, id, how); err != nil {
		return err
	}
	v.ok[id].Store(true)
	return nil
}
