package stack

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/lru"
	"github.com/blockfs/blockfs/internal/odirect"
	"github.com/blockfs/blockfs/internal/parallel"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
)

// Reading a field of shards in place: a read of bytes [off, off+n) of block b's data file
// becomes reads of the values it covers in the block's shard, those close together (gapMax)
// merged into one read of the shard whose gaps (tar headers, other fields' values, TFRecord
// framing) are dropped; at most runMax bytes a read.
const (
	gapMax = 64 << 10
	runMax = spanSize - 2*odirect.Align // a span buffer's, with its ends aligned
	// alignedMin is the least span of a run read through an aligned buffer when the shards'
	// backend reads with O_DIRECT (ShardsBackend.Aligned): the whole pages of the span at once,
	// as a packed block is read, not through the kernel's page cache.
	alignedMin = 256 << 10
	// runsInFlight is the most runs of one read read at once.
	runsInFlight = 16
	// vecPieces is the most pieces read through one vector (a piece may take a few entries, a
	// gap one more; Linux's IOV_MAX is 1024).
	vecPieces = 256
	// tablesCost bounds the blocks' places kept decoded (offsets and members: 16 bytes a
	// record).
	tablesCost = 4 << 20
)

// ShardsSource is the source.Blocks of a field of shards in place: its offsets files from the
// index, its data files assembled from the shards. Safe for concurrent use.
type ShardsSource struct {
	d       *layout.Dataset
	sh      layout.ShardsField
	index   source.Blocks
	shards  source.Blocks
	aligned bool
	tables  *lru.Cache[int, *places]
}

// spans are the buffers of runs read whole through O_DIRECT: a fixed few, mapped outside the
// Go heap with huge pages advised, as the cache's arena is, so that a direct read into one is
// a few large disk requests (into the heap's scattered pages it was three times as many, each
// slower: the new epoch ran at 0.55x a packed one's). Mapped at their first use.
var spans struct {
	once sync.Once
	free chan []byte
	err  error
}

// spanCount and spanSize: 4 of 4 MiB, the most RSS they add.
const (
	spanCount = 4
	spanSize  = 4 << 20
)

// getSpan returns a free span buffer, waiting for one within ctx.
func getSpan(ctx context.Context) ([]byte, error) {
	spans.once.Do(func() {
		const huge = 2 << 20
		mem, err := unix.Mmap(-1, 0, spanCount*spanSize+huge, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			spans.err = err
			return
		}
		k := int(uintptr(unsafe.Pointer(unsafe.SliceData(mem))) % huge)
		if k != 0 {
			mem = mem[huge-k:]
		}
		_ = unix.Madvise(mem[:spanCount*spanSize], unix.MADV_HUGEPAGE)
		spans.free = make(chan []byte, spanCount)
		for i := range spanCount {
			spans.free <- mem[i*spanSize : (i+1)*spanSize : (i+1)*spanSize]
		}
	})
	if spans.err != nil {
		return nil, spans.err
	}
	select {
	case b := <-spans.free:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// places is where block b's values are: offsets in the block's data file (records+1) and
// starts in its shard (records).
type places struct {
	offsets []uint64
	starts  []uint64
}

// newShardsSource returns the source of d, a field of shards in place (sh), which reads the
// index's files from index and the shards from shards.
func newShardsSource(d *layout.Dataset, sh layout.ShardsField, index, shards source.Blocks, aligned bool) *ShardsSource {
	return &ShardsSource{d: d, sh: sh, index: index, shards: shards, aligned: aligned, tables: lru.New[int, *places](tablesCost, 2)}
}

// Size implements source.Blocks.
func (s *ShardsSource) Size(id source.FileID) int64 { return s.d.Size(id) }

// Fill implements source.Blocks: an offsets file from the index; a data file from its shard,
// checked against the index's CRC32C when the read is the whole file (the cache's loads from
// an object store; --verify checks any read).
func (s *ShardsSource) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	f, ok := s.d.File(id)
	n := int64(source.Len(bufs))
	if !ok || id > layout.NamesFile(s.d.Blocks()) || off < 0 || off+n > f.Size {
		return &source.Error{Op: "read", Name: f.Name, Off: off, Err: source.ErrNoFile}
	}
	if f.Role == layout.RoleOffsets {
		return s.index.Fill(ctx, id, off, bufs, how)
	}
	if s.sh.ValuesInIndex() { // a small field, stored in the index
		if err := s.index.Fill(ctx, id, off, bufs, how); err != nil {
			return err
		}
		return s.check(f, off, bufs, how)
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
	return s.check(f, off, bufs, how)
}

// check checks a read of a block's whole values, bufs from off of its data file f, against
// the index's CRC32C.
func (s *ShardsSource) check(f layout.File, off int64, bufs [][]byte, how source.Read) error {
	if off == 0 && int64(source.Len(bufs)) == f.Size && !how.CallerChecks {
		crc := uint32(0)
		for _, b := range bufs {
			crc = crc32c.Update(crc, b)
		}
		if err := source.CheckCRC32C(crc, f.CRC32C); err != nil {
			return &source.Error{Op: "check", Name: f.Name, Off: -1, Err: fmt.Errorf("%w (a value of field %q %w)", err, s.d.Manifest.Extra["field"], layout.ErrIndexOutOfStep)}
		}
	}
	return nil
}

// assemble fills bufs from off of block b's data file, whose values pl places.
func (s *ShardsSource) assemble(ctx context.Context, b int, pl *places, off int64, bufs [][]byte, how source.Read) error {
	end := off + int64(source.Len(bufs))
	shard, size := s.sh.Shard(b)
	k := sort.Search(len(pl.starts), func(k int) bool { return pl.offsets[k+1] > uint64(off) })
	var runs [][]piece
	for ; k < len(pl.starts) && int64(pl.offsets[k]) < end; k++ {
		lo, hi := max(int64(pl.offsets[k]), off), min(int64(pl.offsets[k+1]), end)
		if lo >= hi {
			continue
		}
		at := int64(pl.starts[k]) + lo - int64(pl.offsets[k])
		for lo < hi { // a value longer than a run is read in runs of its own
			p := piece{at: at, lo: lo, hi: min(hi, lo+runMax)}
			at, lo = at+p.hi-p.lo, p.hi
			if n := len(runs); n > 0 {
				run := runs[n-1]
				last := run[len(run)-1]
				if gap := p.at - (last.at + last.hi - last.lo); gap >= 0 && gap <= gapMax && p.at+p.hi-p.lo-run[0].at <= runMax {
					runs[n-1] = append(run, p)
					continue
				}
			}
			runs = append(runs, []piece{p})
		}
	}
	if len(runs) == 1 {
		return s.readRun(ctx, shard, size, runs[0], off, bufs, how)
	}
	// Runs apart in the shard (a small field's values between a large one's) are read at
	// once, up to runsInFlight, so that their waits overlap.
	return parallel.Each(ctx, len(runs), runsInFlight, func(ctx context.Context, i int) error {
		return s.readRun(ctx, shard, size, runs[i], off, bufs, how)
	})
}

// piece is bytes [lo, hi) of a block's data file, at in its shard.
type piece struct{ at, lo, hi int64 }

// readRun reads run's pieces, close together in shard, into their places in bufs (which hold
// the block's bytes from off) with one read of the shard: each piece straight into its place,
// the bytes between pieces (tar headers, other fields' values, TFRecord framing; at most gapMax
// each) into one scratch buffer, read over and dropped; or, for more pieces than one read's
// vector may hold (tiny values), the whole span into a buffer, the pieces copied out.
func (s *ShardsSource) readRun(ctx context.Context, shard source.FileID, size int64, run []piece, off int64, bufs [][]byte, how source.Read) error {
	first, last := run[0], run[len(run)-1]
	end := last.at + last.hi - last.lo
	if s.aligned {
		// Whole pages with O_DIRECT: a long run into a span buffer, a short one (a small
		// field's value) into a buffer of its own, never through the kernel's readahead.
		lo, up := first.at&^(odirect.Align-1), (end+odirect.Align-1)&^(odirect.Align-1)
		if end-first.at < alignedMin {
			return s.copyRun(ctx, shard, lo, odirect.AlignedBuf(int(up - lo))[:min(up, size)-lo:up-lo], run, off, bufs, how)
		}
		buf, err := getSpan(ctx)
		if err != nil {
			return err
		}
		defer func() { spans.free <- buf }()
		return s.copyRun(ctx, shard, lo, buf[:min(up, size)-lo:up-lo], run, off, bufs, how)
	}
	if len(run) > vecPieces {
		return s.copyRun(ctx, shard, first.at, make([]byte, end-first.at), run, off, bufs, how)
	}
	var iov [][]byte
	var gaps int64
	for i, p := range run[:len(run)-1] {
		gaps += max(0, run[i+1].at-(p.at+p.hi-p.lo))
	}
	// Each gap has bytes of its own: a backend may fill the vector's parts at once (an object
	// store's parallel ranged GETs).
	scratch := make([]byte, gaps)
	for i, p := range run {
		iov = append(iov, source.SliceBufs(bufs, p.lo-off, p.hi-off)...)
		if i+1 == len(run) {
			break
		}
		if gap := run[i+1].at - (p.at + p.hi - p.lo); gap > 0 {
			iov, scratch = append(iov, scratch[:gap:gap]), scratch[gap:]
		}
	}
	return s.shards.Fill(ctx, shard, first.at, iov, how)
}

// copyRun reads buf from at of shard and copies run's pieces out of it into bufs.
func (s *ShardsSource) copyRun(ctx context.Context, shard source.FileID, at int64, buf []byte, run []piece, off int64, bufs [][]byte, how source.Read) error {
	if err := s.shards.Fill(ctx, shard, at, [][]byte{buf}, how); err != nil {
		return err
	}
	for _, p := range run {
		src := buf[p.at-at : p.at-at+p.hi-p.lo]
		for _, dst := range source.SliceBufs(bufs, p.lo-off, p.hi-off) {
			src = src[copy(dst, src):]
		}
	}
	return nil
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
	if err := s.index.Fill(ctx, layout.OffsetsFile(b), 0, [][]byte{raw[:8*(n+1)]}, how); err != nil {
		return nil, err
	}
	if err := s.index.Fill(ctx, layout.MembersFile(s.d.Blocks(), b), 0, [][]byte{raw[8*(n+1):]}, how); err != nil {
		return nil, err
	}
	bad := func(what string) error {
		return &layout.Error{Path: s.sh.IndexPath(), Block: b, Kind: layout.ErrCorrupt,
			Msg: fmt.Sprintf("the index of field %q is damaged (%s): make it again with blockfs index", s.d.Manifest.Extra["field"], what)}
	}
	offCRC, memCRC := s.sh.IndexCRCs(b)
	if err := source.CheckCRC32C(crc32c.Checksum(raw[:8*(n+1)]), offCRC); err != nil {
		return nil, bad("offsets: " + err.Error())
	}
	if err := source.CheckCRC32C(crc32c.Checksum(raw[8*(n+1):]), memCRC); err != nil {
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
	_, shardSize := s.sh.Shard(b)
	size := uint64(shardSize)
	for i := range pl.starts {
		pl.starts[i] = binary.LittleEndian.Uint64(raw[8*(int(n)+1+i):])
		if v := pl.offsets[i+1] - pl.offsets[i]; pl.starts[i] > size || v > size-pl.starts[i] {
			return nil, bad("a value past the end of its shard")
		}
	}
	s.tables.Add(b, pl, 16*n)
	return pl, nil
}
