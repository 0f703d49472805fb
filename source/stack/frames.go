package stack

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/blockfs/blockfs/internal/lru"
	"github.com/blockfs/blockfs/internal/parallel"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
)

// headersCost bounds the parsed headers a FramesSource keeps (headerCost each): 1 MiB, the
// headers of some 3000 blocks of 16 frames.
const headersCost = 1 << 20

// headFirst is the first read of a compressed file's header: enough for the header of a block
// of up to 509 frames in one read (a 16 MiB block of 1 MiB frames has 16).
const headFirst = 4096

// FramesSource is a source.Blocks over below, which holds some of its files compressed (a
// header and zstd frames: layout/frames.go): it serves those files' uncompressed bytes, reading and
// checking only the frames a Fill touches, and passes every other file through. framed says
// which files are compressed and their uncompressed size (from the manifest). A damaged header
// or frame is a *source.Error wrapping source.ErrCorrupt and layout.ErrFrames: EIO, never other bytes.
// Safe for concurrent use. Build stacks it over a compressed pack.
type FramesSource struct {
	below  source.Blocks
	framed func(id source.FileID) (raw int64, ok bool)
	heads  *lru.Cache[source.FileID, *layout.Frames]
	frame  int64                         // the frame size every header must give (the manifest's); 0: any
	name   func(id source.FileID) string // a file's path, for errors; nil: its number

	slots *source.Slots // a frame being decompressed holds one (DecodeSlots)
	comp  *source.Slots // bytes of compressed frames in flight (DecodeMemory's rest)

	decs sync.Pool // *zstd.Decoder

	spans     bufList // the compressed frames of a Fill (compInFlight bytes kept)
	scratches bufList // a frame decompressed (layout.ScratchSize; one a slot kept)

	frames, stored, raw, errs, ns atomic.Uint64 // FramesStats
}

// FramesStats counts a FramesSource's work: stats.json's "decompress".
type FramesStats struct {
	Frames  uint64  `json:"frames"`       // frames decompressed
	Stored  uint64  `json:"stored_bytes"` // their compressed bytes
	Raw     uint64  `json:"bytes"`        // their uncompressed bytes
	Seconds float64 `json:"seconds"`      // time spent decompressing them, on the loads' goroutines
	Errors  uint64  `json:"errors"`       // damaged headers and frames met (each an EIO)
}

// Stats returns the counters now.
func (s *FramesSource) Stats() FramesStats {
	return FramesStats{Frames: s.frames.Load(), Stored: s.stored.Load(), Raw: s.raw.Load(),
		Seconds: float64(s.ns.Load()) / 1e9, Errors: s.errs.Load()}
}

// NewFramesSource returns the uncompressed view of below's compressed files, whose frames hold
// frame bytes (0: any frame size up to layout.MaxFrame).
func NewFramesSource(below source.Blocks, framed func(id source.FileID) (raw int64, ok bool), frame int64) *FramesSource {
	s := &FramesSource{below: below, framed: framed, heads: lru.New[source.FileID, *layout.Frames](headersCost, 1),
		frame: frame, slots: source.NewSlots(DecodeSlots(frame)), comp: source.NewWeighted(compInFlight(frame))}
	s.spans.keep = compInFlight(frame)
	s.scratches.keep = int64(DecodeSlots(frame)) * layout.ScratchSize(orLargest(frame))
	return s
}

// decodeMemory bounds what a FramesSource decompresses in, beside the cache: its decode
// buffers, one a slot (layout.ScratchSize each), and the compressed frames of the reads in flight,
// half each. A read allocated its compressed frames before it waited for a slot, and every
// slot its buffer, so that 64 MiB frames had the daemon OOM-killed under one dd.
const decodeMemory = 64 << 20

// DecodeSlots returns how many frames of frame bytes (0: layout.MaxFrame) a FramesSource decompresses
// at once: one a core, as long as their buffers take at most half of decodeMemory; one at least.
func DecodeSlots(frame int64) int {
	return max(1, min(runtime.GOMAXPROCS(0), int(decodeMemory/2/layout.ScratchSize(orLargest(frame)))))
}

// compInFlight is the bytes of compressed frames a FramesSource's reads hold at once: the other
// half of decodeMemory, or one frame's worst case where that is more (a read of more waits
// until it is alone).
func compInFlight(frame int64) int64 {
	frame = orLargest(frame)
	return max(decodeMemory/2, int64(layout.FramesBound(frame, frame)))
}

// orLargest is frame, or layout.MaxFrame for 0 (any frame size): what bounds are planned for.
func orLargest(frame int64) int64 {
	if frame <= 0 {
		return layout.MaxFrame
	}
	return frame
}

// DecodeMemory returns the most a FramesSource of frames of frame bytes (0: layout.MaxFrame) holds to
// decompress, beside the cache: for 1 MiB frames on 16 cores, 18 MiB of buffers and 32 MiB of
// compressed frames; for 64 MiB frames, one buffer of 64 MiB and one frame compressed.
func DecodeMemory(frame int64) int64 {
	frame = orLargest(frame)
	return int64(DecodeSlots(frame))*layout.ScratchSize(frame) + compInFlight(frame)
}

// Size implements source.Blocks: a compressed file's uncompressed bytes.
func (s *FramesSource) Size(id source.FileID) int64 {
	if raw, ok := s.framed(id); ok {
		return raw
	}
	return s.below.Size(id)
}

// Fill implements source.Blocks.
func (s *FramesSource) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	raw, ok := s.framed(id)
	if !ok {
		return s.below.Fill(ctx, id, off, bufs, how)
	}
	n := int64(source.Len(bufs))
	if off < 0 || off+n > raw {
		return fmt.Errorf("read of [%d, %d) past the %d bytes of compressed file %d", off, off+n, raw, id)
	}
	if n == 0 {
		return nil
	}
	f, comp, at, put, err := s.read(ctx, id, off, n, raw, how)
	if err != nil {
		return err
	}
	defer put()
	// Each frame is decompressed once, into the buffers that hold its bytes; the frames of a
	// Fill side by side, as many at once across every Fill as there are cores (slots): one load
	// of several frames uses them all, many loads at once no more, and a reader's frames go
	// before readahead's.
	pieces := framePieces(bufs, off, f.Frame)
	one := func(ctx context.Context, k int) error {
		i := int(pieces[k][0].off / f.Frame)
		return s.decodeFrame(ctx, how, id, f, i, comp[f.At(i)-at:f.At(i+1)-at], pieces[k])
	}
	if len(pieces) == 1 {
		return one(ctx, 0)
	}
	return parallel.Each(ctx, len(pieces), runtime.GOMAXPROCS(0), one)
}

// read returns file id's header and the compressed bytes of the frames that hold [off,
// off+n), from at in the file, and the call that gives their buffer back. A read of the whole
// block (an object store's load takes whole blocks) reads the whole file at once, header and
// frames: one request, the file checked whole where the layer below does that.
func (s *FramesSource) read(ctx context.Context, id source.FileID, off, n, raw int64, how source.Read) (*layout.Frames, []byte, int64, func(), error) {
	f, cached := s.heads.Get(id)
	if !cached && off == 0 && n == raw {
		size := s.below.Size(id)
		cp, put, err := s.span(ctx, size, how)
		if err != nil {
			return nil, nil, 0, nil, err
		}
		b := (*cp)[:size]
		if err := s.below.Fill(ctx, id, 0, [][]byte{b}, how); err != nil {
			put()
			return nil, nil, 0, nil, err
		}
		f, err := s.parse(id, b, size, raw)
		if err != nil {
			put()
			return nil, nil, 0, nil, err
		}
		return f, b[f.At(0):], f.At(0), put, nil
	}
	if !cached {
		var err error
		if f, err = s.header(ctx, id, raw, how); err != nil {
			return nil, nil, 0, nil, err
		}
	}
	_, _, at, size := f.Span(off, n)
	cp, put, err := s.span(ctx, size, how)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	comp := (*cp)[:size]
	if err := s.below.Fill(ctx, id, at, [][]byte{comp}, how); err != nil {
		put()
		return nil, nil, 0, nil, err
	}
	return f, comp, at, put, nil
}

// slotPoll is how often a readahead's frame waiting for a slot looks whether a reader now
// waits for it (source.Slots).
const slotPoll = 10 * time.Millisecond

// decodeFrame decompresses frame i of file id (header f), src its compressed bytes, into the
// pieces of the buffers that hold its bytes, once a slot is free (a reader's read, how, before
// readahead's).
func (s *FramesSource) decodeFrame(ctx context.Context, how source.Read, id source.FileID, f *layout.Frames, i int, src []byte, pieces []framePiece) error {
	if err := s.slots.Acquire(ctx, how, slotPoll, nil); err != nil {
		return err
	}
	defer s.slots.Release()
	dec, put, err := s.decoder()
	if err != nil {
		return err
	}
	defer put()
	sp := s.scratch(layout.ScratchSize(f.Frame))
	defer s.scratches.put(sp)
	start := time.Now()
	got, err := f.DecodeFrame(dec, i, src, *sp)
	if err != nil {
		s.errs.Add(1)
		return s.corrupt(id, f.At(i), err)
	}
	s.ns.Add(uint64(time.Since(start)))
	s.frames.Add(1)
	s.stored.Add(uint64(len(src)))
	s.raw.Add(uint64(len(got)))
	for _, pc := range pieces {
		copy(pc.dst, got[pc.off-int64(i)*f.Frame:])
	}
	return nil
}

// framePiece is bytes of a Fill's buffers within one frame: dst, from off in the file.
type framePiece struct {
	dst []byte
	off int64
}

// framePieces cuts bufs, the bytes from off on, at every frame's boundary, and groups the
// pieces by frame: one group a frame, in order.
func framePieces(bufs [][]byte, off, frame int64) [][]framePiece {
	var out [][]framePiece
	for _, b := range bufs {
		for len(b) > 0 {
			n := min(int64(len(b)), (off/frame+1)*frame-off)
			pc := framePiece{dst: b[:n], off: off}
			if k := len(out) - 1; k >= 0 && out[k][0].off/frame == off/frame {
				out[k] = append(out[k], pc)
			} else {
				out = append(out, []framePiece{pc})
			}
			b, off = b[n:], off+n
		}
	}
	return out
}

// span returns a buffer of at least size bytes for a Fill's compressed frames, a kept one where
// one serves, once the bytes in flight leave room for it (a span larger than the room waits for
// all of it; a reader's read before readahead's, how), and the call that gives it back. An
// object store's loads of whole blocks count too: while the store answers, each holds its
// block's compressed bytes.
func (s *FramesSource) span(ctx context.Context, size int64, how source.Read) (*[]byte, func(), error) {
	// A span is allocated in whole frames' worst cases (one at least), so that the kept buffers
	// fit the spans that follow (of one frame, of several, a whole block's): spans of each
	// their own size were allocated anew whenever the kept one was a little short (64 MiB
	// frames: 20 MiB over the bound in garbage). What is allocated is what counts.
	alloc := size
	if s.frame > 0 {
		fb := int64(layout.FramesBound(s.frame, s.frame))
		alloc = max(1, (size+fb-1)/fb) * fb
	}
	w := min(alloc, compInFlight(s.frame))
	if err := s.comp.AcquireN(ctx, how, w, slotPoll, nil); err != nil {
		return nil, nil, err
	}
	cp := s.spans.get(alloc)
	return cp, func() { s.spans.put(cp); s.comp.ReleaseN(w) }, nil
}

// scratch returns a buffer of size bytes (layout.ScratchSize) to decompress frames into.
func (s *FramesSource) scratch(size int64) *[]byte { return s.scratches.get(size) }

// header reads file id's header and checks it (parse).
func (s *FramesSource) header(ctx context.Context, id source.FileID, raw int64, how source.Read) (*layout.Frames, error) {
	size := s.below.Size(id)
	b := make([]byte, min(size, headFirst))
	if err := s.below.Fill(ctx, id, 0, [][]byte{b}, how); err != nil {
		return nil, err
	}
	// The header's size follows from its frame size and the block's bytes; ParseFrames checks
	// both (and a size past the file's).
	if head, ok := layout.FramesHeaderLen(b, raw); ok && head > int64(len(b)) && head <= size {
		have := len(b)
		b = append(b, make([]byte, head-int64(have))...)
		if err := s.below.Fill(ctx, id, int64(have), [][]byte{b[have:]}, how); err != nil {
			return nil, err
		}
	}
	return s.parse(id, b, size, raw)
}

// parse parses and checks file id's header at the start of b (the file is size bytes, raw
// served) and keeps it in the LRU.
func (s *FramesSource) parse(id source.FileID, b []byte, size, raw int64) (*layout.Frames, error) {
	f, err := layout.ParseFrames(b, size, raw)
	if err == nil && s.frame != 0 && f.Frame != s.frame {
		err = fmt.Errorf("%w: the header's frame size is %d, the manifest's %d", layout.ErrFrames, f.Frame, s.frame)
	}
	if err != nil {
		s.errs.Add(1)
		return nil, s.corrupt(id, 0, err)
	}
	s.heads.Add(id, f, headerCost(f))
	return f, nil
}

// headerCost is what a parsed header takes in memory: a size, a CRC32C and an offset a frame
// (16 bytes), the Frames and its three slices' headers.
func headerCost(f *layout.Frames) uint64 { return uint64(16*len(f.Sizes) + 96) }

// decoder returns a decoder (layout.NewFramesDecoder), and the call that gives it back.
func (s *FramesSource) decoder() (*zstd.Decoder, func(), error) {
	d, _ := s.decs.Get().(*zstd.Decoder)
	if d == nil {
		var err error
		if d, err = layout.NewFramesDecoder(); err != nil {
			return nil, nil, err
		}
	}
	return d, func() { s.decs.Put(d) }, nil
}

// corrupt wraps a damaged header's or frame's error as a read error of file id.
func (s *FramesSource) corrupt(id source.FileID, off int64, err error) error {
	name := fmt.Sprintf("file %d", id)
	if s.name != nil {
		name = s.name(id)
	}
	return &source.Error{Op: "read", Name: name, Off: off, Err: fmt.Errorf("%w: %w", source.ErrCorrupt, err)}
}
