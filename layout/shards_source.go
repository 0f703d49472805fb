package layout

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/lru"
	"github.com/blockfs/blockfs/source"
)

// Reading a field of shards in place: a read of bytes [off, off+n) of block b's data file
// becomes reads of the values it covers in the block's shard, those close together (gapMax)
// merged into one read of the shard whose gaps (tar headers, other fields' values, TFRecord
// framing) are dropped; at most runMax bytes a read.
const (
	gapMax = 64 << 10
	runMax = 8 << 20
	// vecPieces is the most pieces read through one vector (a piece may take a few entries, a
	// gap one more; Linux's IOV_MAX is 1024).
	vecPieces = 256
	// tablesCost bounds the blocks' places kept decoded (offsets and members: 16 bytes a
	// record).
	tablesCost = 16 << 20
)

// ShardsSource is the source.Blocks of a field of shards in place: its offsets files from the
// index, its data files assembled from the shards. Safe for concurrent use.
type ShardsSource struct {
	d      *Dataset
	sh     *shardsShape
	index  source.Blocks
	shards source.Blocks
	tables *lru.Cache[int, *places]
}

// places is where block b's values are: offsets in the block's data file (records+1) and
// starts in its shard (records).
type places struct {
	offsets []uint64
	starts  []uint64
}

func newShardsSource(d *Dataset, sh *shardsShape, index, shards source.Blocks) *ShardsSource {
	return &ShardsSource{d: d, sh: sh, index: index, shards: shards, tables: lru.New[int, *places](tablesCost, 2)}
}

// Size implements source.Blocks.
func (s *ShardsSource) Size(id source.FileID) int64 { return s.d.Size(id) }

// Fill implements source.Blocks: an offsets file from the index; a data file from its shard,
// checked against the index's CRC32C when the read is the whole file (the cache's loads from
// an object store; --verify checks any read).
func (s *ShardsSource) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	f, ok := s.d.File(id)
	n := int64(source.Len(bufs))
	if !ok || id > NamesFile(s.d.Blocks()) || off < 0 || off+n > f.Size {
		return &source.Error{Op: "read", Name: f.Name, Off: off, Err: source.ErrNoFile}
	}
	if f.Role == RoleOffsets {
		return s.index.Fill(ctx, id, off, bufs, how)
	}
	if n == 0 {
		return nil
	}
	pl, err := s.places(ctx, f.Block, how)
	if err != nil {
		return err
	}
	if err := s.assemble(ctx, f.Block, pl, off, bufs, how); err != nil {
		return err
	}
	if off == 0 && n == f.Size && !how.CallerChecks {
		crc := uint32(0)
		for _, b := range bufs {
			crc = crc32c.Update(crc, b)
		}
		if err := crc32c.Check(crc, f.CRC32C); err != nil {
			return &source.Error{Op: "check", Name: f.Name, Off: -1, Err: fmt.Errorf("%w (a value of field %q changed in its shard since it was indexed)", err, s.d.Manifest.Extra["field"])}
		}
	}
	return nil
}

// assemble fills bufs from off of block b's data file, whose values pl places.
func (s *ShardsSource) assemble(ctx context.Context, b int, pl *places, off int64, bufs [][]byte, how source.Read) error {
	end := off + int64(source.Len(bufs))
	shard := ShardFile(s.d.Blocks(), int(s.sh.shardOf[b]))
	k := sort.Search(len(pl.starts), func(k int) bool { return pl.offsets[k+1] > uint64(off) })
	var run []piece
	flush := func() error {
		err := s.readRun(ctx, shard, run, off, bufs, how)
		run = run[:0]
		return err
	}
	for ; k < len(pl.starts) && int64(pl.offsets[k]) < end; k++ {
		lo, hi := max(int64(pl.offsets[k]), off), min(int64(pl.offsets[k+1]), end)
		if lo >= hi {
			continue
		}
		p := piece{at: int64(pl.starts[k]) + lo - int64(pl.offsets[k]), lo: lo, hi: hi}
		if len(run) > 0 {
			last := run[len(run)-1]
			if gap := p.at - (last.at + last.hi - last.lo); gap < 0 || gap > gapMax || p.at+p.hi-p.lo-run[0].at > runMax {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		run = append(run, p)
	}
	if len(run) > 0 {
		return flush()
	}
	return nil
}

// piece is bytes [lo, hi) of a block's data file, at in its shard.
type piece struct{ at, lo, hi int64 }

// readRun reads run's pieces, close together in shard, into their places in bufs (which hold
// the block's bytes from off) with one read of the shard: each piece straight into its place,
// the bytes between pieces (tar headers, other fields' values, TFRecord framing; at most gapMax
// each) into one scratch buffer, read over and dropped; or, for more pieces than one read's
// vector may hold (tiny values), the whole span into a buffer, the pieces copied out.
func (s *ShardsSource) readRun(ctx context.Context, shard source.FileID, run []piece, off int64, bufs [][]byte, how source.Read) error {
	first, last := run[0], run[len(run)-1]
	if len(run) > vecPieces {
		tmp := make([]byte, last.at+last.hi-last.lo-first.at)
		if err := s.shards.Fill(ctx, shard, first.at, [][]byte{tmp}, how); err != nil {
			return err
		}
		for _, p := range run {
			src := tmp[p.at-first.at : p.at-first.at+p.hi-p.lo]
			for _, dst := range source.SliceBufs(bufs, p.lo-off, p.hi-off) {
				src = src[copy(dst, src):]
			}
		}
		return nil
	}
	var iov [][]byte
	var scratch []byte
	for i, p := range run {
		iov = append(iov, source.SliceBufs(bufs, p.lo-off, p.hi-off)...)
		if i+1 == len(run) {
			break
		}
		if gap := run[i+1].at - (p.at + p.hi - p.lo); gap > 0 {
			if scratch == nil {
				scratch = make([]byte, gapMax)
			}
			iov = append(iov, scratch[:gap:gap])
		}
	}
	return s.shards.Fill(ctx, shard, first.at, iov, how)
}

// places returns where block b's values are, read from the index and checked: offsets that
// start at 0, never decrease and end at the block's size (their CRC32C, the index's), values
// inside the shard.
func (s *ShardsSource) places(ctx context.Context, b int, how source.Read) (*places, error) {
	if pl, ok := s.tables.Get(b); ok {
		return pl, nil
	}
	n := s.d.BlockRecords(b)
	raw := make([]byte, 8*(2*n+1))
	if err := s.index.Fill(ctx, OffsetsFile(b), 0, [][]byte{raw[:8*(n+1)]}, how); err != nil {
		return nil, err
	}
	if err := s.index.Fill(ctx, MembersFile(s.d.Blocks(), b), 0, [][]byte{raw[8*(n+1):]}, how); err != nil {
		return nil, err
	}
	bad := func(what string) error {
		return errorf(ErrCorrupt, s.sh.offsets, b, "the index of field %q is damaged (%s): make it again with blockfs index", s.d.Manifest.Extra["field"], what)
	}
	if err := crc32c.Check(crc32c.Checksum(raw[:8*(n+1)]), s.sh.offCRCs[b]); err != nil {
		return nil, bad("offsets: " + err.Error())
	}
	if err := crc32c.Check(crc32c.Checksum(raw[8*(n+1):]), s.sh.memCRCs[b]); err != nil {
		return nil, bad("members: " + err.Error())
	}
	pl := &places{offsets: make([]uint64, n+1), starts: make([]uint64, n)}
	for i := range pl.offsets {
		pl.offsets[i] = binary.LittleEndian.Uint64(raw[8*i:])
		if (i == 0 && pl.offsets[0] != 0) || (i > 0 && pl.offsets[i] < pl.offsets[i-1]) {
			return nil, bad("offsets out of order")
		}
	}
	if pl.offsets[n] != s.d.BlockBytes(b) {
		return nil, bad("offsets do not end at the block's size")
	}
	size := uint64(s.sh.shards[s.sh.shardOf[b]].Size)
	for i := range pl.starts {
		pl.starts[i] = binary.LittleEndian.Uint64(raw[8*(int(n)+1+i):])
		if v := pl.offsets[i+1] - pl.offsets[i]; pl.starts[i] > size || v > size-pl.starts[i] {
			return nil, bad("a value past the end of its shard")
		}
	}
	s.tables.Add(b, pl, 16*n)
	return pl, nil
}
