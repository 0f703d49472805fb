package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/corpus"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
)

// memFiles is a source.Blocks of files in memory, counting the bytes read.
type memFiles struct {
	files map[source.FileID][]byte
	read  atomic.Int64
}

func (m *memFiles) Size(id source.FileID) int64 { return int64(len(m.files[id])) }

func (m *memFiles) Fill(_ context.Context, id source.FileID, off int64, bufs [][]byte, _ source.Read) error {
	f := m.files[id]
	if off < 0 || off+int64(source.Len(bufs)) > int64(len(f)) {
		return fmt.Errorf("read past file %d", id)
	}
	for _, b := range bufs {
		off += int64(copy(b, f[off:]))
		m.read.Add(int64(len(b)))
	}
	return nil
}

// TestFramesSource: reads of any range, into one buffer or several, of compressed files give
// their uncompressed bytes, from several goroutines at once, reading about the frames they
// touch; a file not compressed passes through; a damaged frame is source.ErrCorrupt.
func TestFramesSource(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 4))
	enc := framesEncoder(t)
	const frame = 4096
	raws := map[source.FileID][]byte{}
	below := &memFiles{files: map[source.FileID][]byte{}}
	for id, size := range []int{0, 100, frame, 37*frame + 5, 3000 * frame / 4} {
		raws[source.FileID(id)] = corpus.Text(r, size)
		below.files[source.FileID(id)] = layout.EncodeFrames(raws[source.FileID(id)], frame, enc, 2)
	}
	plain := source.FileID(99)
	below.files[plain] = corpus.Text(r, 5000)
	s := NewFramesSource(below, func(id source.FileID) (int64, bool) {
		raw, ok := raws[id]
		return int64(len(raw)), ok
	}, 0)
	require.EqualValues(t, 37*frame+5, s.Size(3))
	require.EqualValues(t, 5000, s.Size(plain))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(40, uint64(g)))
			for k := 0; k < 200; k++ {
				id := source.FileID(1 + r.IntN(4))
				raw := raws[id]
				off := r.Int64N(int64(len(raw)))
				n := 1 + r.Int64N(min(int64(len(raw))-off, 3*frame))
				var bufs [][]byte
				for left := n; left > 0; {
					m := min(left, 1+r.Int64N(2*frame))
					bufs, left = append(bufs, make([]byte, m)), left-m
				}
				if err := s.Fill(context.Background(), id, off, bufs, source.Read{}); err != nil {
					t.Error(err)
					return
				}
				if got := bytes.Join(bufs, nil); !bytes.Equal(got, raw[off:off+n]) {
					t.Errorf("file %d [%d, +%d): other bytes", id, off, n)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, s.Fill(context.Background(), 0, 0, nil, source.Read{}), "an empty file, nothing asked")
	got := make([]byte, 5000)
	require.NoError(t, s.Fill(context.Background(), plain, 0, [][]byte{got}, source.Read{}))
	require.Equal(t, below.files[plain], got, "a file not compressed passes through")

	// One frame of a large file read: about a frame's compressed bytes below, not the file's.
	before := below.read.Load()
	require.NoError(t, s.Fill(context.Background(), 4, 100*frame+7, [][]byte{make([]byte, 10)}, source.Read{}))
	require.Less(t, below.read.Load()-before, int64(2*frame))

	// Frames cut across buffers (pages smaller than a frame): frames 10 to 12 in six buffers
	// of half a frame, their bytes, three frames counted (TestFramePieces: each once).
	st := s.Stats()
	halves := make([][]byte, 6)
	for i := range halves {
		halves[i] = make([]byte, frame/2)
	}
	require.NoError(t, s.Fill(context.Background(), 4, 10*frame, halves, source.Read{}))
	require.Equal(t, raws[4][10*frame:13*frame], bytes.Join(halves, nil))
	require.EqualValues(t, 3, s.Stats().Frames-st.Frames, "each frame decompressed once")
	require.EqualValues(t, 3*frame, s.Stats().Raw-st.Raw)

	// A flipped byte in a frame is ErrCorrupt at the read that touches it, not at others.
	f := below.files[3]
	hd := layout.FramesHeaderSize(int64(len(raws[3])), frame)
	f[hd+int64(len(f)-int(hd))/2] ^= 0x40
	corrupt := NewFramesSource(below, func(id source.FileID) (int64, bool) { return int64(len(raws[id])), id == 3 }, 0)
	err := corrupt.Fill(context.Background(), 3, 0, [][]byte{make([]byte, len(raws[3]))}, source.Read{})
	require.Error(t, err)
	require.True(t, errors.Is(err, source.ErrCorrupt) && errors.Is(err, layout.ErrFrames), "%v", err)
	require.NoError(t, corrupt.Fill(context.Background(), 3, 0, [][]byte{make([]byte, 10)}, source.Read{}), "the first frame is whole")
	// A header that does not hold is ErrCorrupt too.
	f[5] ^= 1
	err = NewFramesSource(below, corrupt.framed, 0).Fill(context.Background(), 3, 0, [][]byte{make([]byte, 10)}, source.Read{})
	require.ErrorIs(t, err, source.ErrCorrupt)
	// A read past the uncompressed bytes is refused.
	require.Error(t, s.Fill(context.Background(), 1, 90, [][]byte{make([]byte, 20)}, source.Read{}))
}

// TestFramePieces: buffers cut at frame boundaries, grouped by frame, so that each frame is
// decompressed once into every buffer that holds some of it.
func TestFramePieces(t *testing.T) {
	const frame = 100
	bufs := [][]byte{make([]byte, 30), make([]byte, 50), make([]byte, 140), make([]byte, 10)}
	groups := framePieces(bufs, 70, frame) // bytes 70 to 300
	var got [][][2]int64
	for _, g := range groups {
		var offs [][2]int64
		for _, pc := range g {
			offs = append(offs, [2]int64{pc.off, int64(len(pc.dst))})
		}
		got = append(got, offs)
	}
	require.Equal(t, [][][2]int64{
		{{70, 30}},             // frame 0: the first buffer
		{{100, 50}, {150, 50}}, // frame 1: the second buffer and the third's start
		{{200, 90}, {290, 10}}, // frame 2: the third's rest and the fourth
	}, got)
}

// TestFramesSourceLongHeader: a header longer than the first read (a block of many frames) is
// read whole.
func TestFramesSourceLongHeader(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 5))
	const frame = 4096
	raw := corpus.Text(r, 1000*frame+1) // 1001 frames: a header of 8028 bytes
	below := &memFiles{files: map[source.FileID][]byte{7: layout.EncodeFrames(raw, frame, framesEncoder(t), 2)}}
	require.Greater(t, layout.FramesHeaderSize(int64(len(raw)), frame), int64(headFirst))
	s := NewFramesSource(below, func(source.FileID) (int64, bool) { return int64(len(raw)), true }, frame)
	got := make([]byte, 3*frame)
	require.NoError(t, s.Fill(context.Background(), 7, 997*frame, [][]byte{got}, source.Read{}))
	require.Equal(t, raw[997*frame:1000*frame], got)
}

// gatedFiles is memFiles whose Fills of compressed frames (past the header) wait at a gate,
// counting the bytes they hold at once.
type gatedFiles struct {
	memFiles
	head                         int64
	gate                         chan struct{}
	held, peak, arrived, waiting atomic.Int64
}

func (g *gatedFiles) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	if off >= g.head {
		n := int64(source.Len(bufs))
		now := g.held.Add(n)
		for p := g.peak.Load(); now > p && !g.peak.CompareAndSwap(p, now); p = g.peak.Load() {
		}
		g.arrived.Add(1)
		g.waiting.Add(1)
		<-g.gate
		g.waiting.Add(-1)
		defer g.held.Add(-n)
	}
	return g.memFiles.Fill(ctx, id, off, bufs, how)
}

// TestFramesSourceMemory: the compressed frames of the reads in flight are bounded (half of
// decodeMemory: 32 MiB) however many read at once, and the decode slots by their buffers'
// memory: 64 MiB frames are decompressed one at a time. Before, each read allocated its
// compressed frames before it waited for a slot, and a slot a core its 64 MiB buffer.
func TestFramesSourceMemory(t *testing.T) {
	require.Equal(t, 1, DecodeSlots(layout.MaxFrame), "64 MiB frames: one at a time")
	require.Equal(t, 1, DecodeSlots(0), "any frame size: as for the largest")
	require.LessOrEqual(t, DecodeMemory(1<<20), int64(64<<20))
	require.Less(t, DecodeMemory(layout.MaxFrame), int64(3*layout.MaxFrame), "one buffer and one frame compressed")

	const frame = 1 << 20
	raw := make([]byte, 64*frame)
	rand.NewChaCha8([32]byte{7}).Read(raw) // incompressible: a frame stays about 1 MiB
	file := layout.EncodeFrames(raw, frame, framesEncoder(t), 2)
	g := &gatedFiles{memFiles: memFiles{files: map[source.FileID][]byte{1: file}}, head: layout.FramesHeaderSize(int64(len(raw)), frame), gate: make(chan struct{})}
	s := NewFramesSource(g, func(source.FileID) (int64, bool) { return int64(len(raw)), true }, frame)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for k := range 8 { // 8 reads of 8 frames each: 64 MiB compressed if all were let in
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 8*frame)
			if err := s.Fill(context.Background(), 1, int64(k)*8*frame, [][]byte{buf}, source.Read{}); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(buf, raw[k*8*frame:(k+1)*8*frame]) {
				errs <- fmt.Errorf("read %d: other bytes", k)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// A read is let through only once no other has come to the gate for 50 ms: every read that
	// can be in flight at once is.
	last, seen := time.Now(), int64(0)
	for open := true; open; {
		select {
		case <-done:
			open = false
		case <-time.After(5 * time.Millisecond):
			if now := g.arrived.Load(); now != seen {
				last, seen = time.Now(), now
			} else if time.Since(last) > 50*time.Millisecond && g.waiting.Load() > 0 {
				select {
				case g.gate <- struct{}{}:
				case <-done:
					open = false
				}
				last = time.Now()
			}
		}
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, g.peak.Load(), int64(decodeMemory/2), "compressed frames in flight")
	require.Greater(t, g.peak.Load(), int64(8*frame), "reads do run side by side")
}

func framesEncoder(t *testing.T) *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	return enc
}
