package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/corpus"
)

func framesEncoder(t *testing.T) *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	return enc
}

// TestFramesRoundTrip: any range of a compressed block decodes to the block's bytes, for
// blocks of no bytes, less than a frame, whole frames and a short last frame.
func TestFramesRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 1))
	enc := framesEncoder(t)
	for _, frame := range []int64{4096, 1 << 20} {
		dec, err := NewFramesDecoder()
		require.NoError(t, err)
		scratch := make([]byte, ScratchSize(frame))
		for _, size := range []int{0, 1, 4095, 4096, 3*4096 + 17, 1 << 20, 3<<20 + 17} {
			raw := corpus.Text(r, size)
			file := EncodeFrames(raw, frame, enc, 1)
			f, err := ParseFrames(file, int64(len(file)), int64(size))
			require.NoError(t, err, "frame %d size %d", frame, size)
			if size > 4096 {
				require.Less(t, len(file), size/2, "text compresses")
			}
			for k := 0; k < 50 && size > 0; k++ {
				off := r.Int64N(int64(size))
				n := 1 + r.Int64N(min(int64(size)-off, 3*frame))
				first, last, at, span := f.Span(off, n)
				require.LessOrEqual(t, first, last)
				dst := make([]byte, n)
				require.NoError(t, f.decodeRange(dec, first, file[at:at+span], off, dst, scratch))
				require.Equal(t, raw[off:off+n], dst, "frame %d size %d [%d, +%d)", frame, size, off, n)
			}
		}
	}
}

// TestFramesCorrupt: a flipped byte anywhere in a compressed block's file is an error wrapping
// ErrFrames, at the header or at the frame that holds it, never other bytes.
func TestFramesCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 2))
	enc := framesEncoder(t)
	const frame = 4096
	dec, err := NewFramesDecoder()
	require.NoError(t, err)
	raw := corpus.Text(r, 5*frame+100)
	file := EncodeFrames(raw, frame, enc, 1)
	for k := 0; k < 300; k++ {
		bad := bytes.Clone(file)
		bad[r.IntN(len(bad))] ^= byte(1 + r.IntN(255))
		f, err := ParseFrames(bad, int64(len(bad)), int64(len(raw)))
		if err == nil {
			dst := make([]byte, len(raw))
			_, _, at, span := f.Span(0, int64(len(raw)))
			err = f.decodeRange(dec, 0, bad[at:at+span], 0, dst, make([]byte, ScratchSize(frame)))
		}
		require.Error(t, err)
		require.True(t, errors.Is(err, ErrFrames), "%v", err)
	}
	_, err = ParseFrames(file, int64(len(file)), int64(len(raw))+1)
	require.ErrorIs(t, err, ErrFrames, "a header of other bytes than the manifest's")
	_, err = ParseFrames(file[:10], int64(len(file)), int64(len(raw)))
	require.ErrorIs(t, err, ErrFrames, "a header cut short")
}

// TestFramesBomb: a frame whose CRC32C holds but that decompresses to more than its length (a
// tampered file made consistent) is refused without decompressing it whole.
func TestFramesBomb(t *testing.T) {
	enc := framesEncoder(t)
	const frame = 4096
	dec, err := NewFramesDecoder()
	require.NoError(t, err)
	big := enc.EncodeAll(make([]byte, 64<<20), nil) // 64 MiB of zeros in one small frame
	raw := make([]byte, frame)
	head := FramesHeaderSize(frame, frame)
	file := EncodeFrames(raw, frame, enc, 1)[:head]
	binary.LittleEndian.PutUint32(file[16:], uint32(len(big)))
	binary.LittleEndian.PutUint32(file[20:], CRC32C(big))
	binary.LittleEndian.PutUint32(file[head-4:], CRC32C(file[:head-4]))
	file = append(file, big...)
	f, err := ParseFrames(file, int64(len(file)), frame)
	require.NoError(t, err)
	dst := make([]byte, frame)
	err = f.decodeRange(dec, 0, file[head:], 0, dst, make([]byte, ScratchSize(frame)))
	require.ErrorIs(t, err, ErrFrames)
	require.Contains(t, err.Error(), "frame 0")
}

// BenchmarkFramesDecode measures decompression per core of 1 MiB frames: text (as JSON Lines)
// and uint16 tokens (a Zipf-like draw of a 50k vocabulary), at zstd's default level. Its MB/s
// are uncompressed bytes out; it reports the ratio of stored to raw bytes too.
func BenchmarkFramesDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(40, 3))
	tokens := make([]byte, 16<<20)
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 2, 50_000)
	for i := 0; i+2 <= len(tokens); i += 2 {
		binary.LittleEndian.PutUint16(tokens[i:], uint16(z.Uint64()))
	}
	text := corpus.Text(r, 16<<20)
	for _, c := range []struct {
		name  string
		raw   []byte
		level int
	}{{"text", text, 3}, {"tokens", tokens, 3}, {"tokens-level1", tokens, 1}, {"tokens-level9", tokens, 9}} {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(c.level)), zstd.WithEncoderCRC(false))
		require.NoError(b, err)
		b.Run(c.name, func(b *testing.B) {
			const frame = 1 << 20
			file := EncodeFrames(c.raw, frame, enc, 2)
			f, err := ParseFrames(file, int64(len(file)), int64(len(c.raw)))
			require.NoError(b, err)
			dec, err := NewFramesDecoder()
			require.NoError(b, err)
			dst, scratch := make([]byte, len(c.raw)), make([]byte, ScratchSize(frame))
			b.SetBytes(int64(len(c.raw)))
			for b.Loop() {
				if err := f.decodeRange(dec, 0, file[f.at[0]:], 0, dst, scratch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(file))/float64(len(c.raw)), "stored/raw")
		})
	}
}

// decodeRange fills dst with the uncompressed bytes from off, from comp, the file's bytes of
// frames first, first+1, ... (Span's), a frame at a time through DecodeFrame and scratch.
func (f *Frames) decodeRange(dec *zstd.Decoder, first int, comp []byte, off int64, dst, scratch []byte) error {
	at := f.at[first]
	for i := first; len(dst) > 0; i++ {
		if i >= len(f.Sizes) {
			return fmt.Errorf("%w: bytes asked past the block's %d", ErrFrames, f.Raw)
		}
		lo, hi := f.at[i]-at, f.at[i+1]-at
		if hi > int64(len(comp)) {
			return fmt.Errorf("%w: frame %d is past the %d bytes read", ErrFrames, i, len(comp))
		}
		got, err := f.DecodeFrame(dec, i, comp[lo:hi], scratch)
		if err != nil {
			return err
		}
		n := copy(dst, got[max(0, off-int64(i)*f.Frame):])
		dst, off = dst[n:], off+int64(n)
	}
	return nil
}

// TestFramesLargeWindow: a frame is any zstd frame of the right bytes (FORMAT.md), whatever
// window its writer declared. The zstd command, and streaming writers, declare a window larger
// than a frame of 1 MiB; such a frame was refused (ErrWindowSizeExceeded, logged as a CRC
// mismatch). It decodes now, and a frame that would decode past the frame's bytes is still an
// error, never an allocation of what it claims.
func TestFramesLargeWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 9))
	const frame = 64 << 10
	raw := corpus.Text(r, 3*frame+100)
	for _, window := range []int{1 << 20, 8 << 20, 128 << 20} {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(window), zstd.WithSingleSegment(false))
		require.NoError(t, err)
		var hdr zstd.Header
		one := enc.EncodeAll(raw[:frame], nil)
		require.NoError(t, hdr.Decode(one))
		require.Greater(t, hdr.WindowSize, uint64(frame), "the frame declares a window larger than itself")
		file := EncodeFrames(raw, frame, enc, 1)
		f, err := ParseFrames(file, int64(len(file)), int64(len(raw)))
		require.NoError(t, err)
		dec, err := NewFramesDecoder()
		require.NoError(t, err)
		dst := make([]byte, len(raw))
		require.NoError(t, f.decodeRange(dec, 0, file[f.at[0]:], 0, dst, make([]byte, ScratchSize(frame))), "window %d", window)
		require.Equal(t, raw, dst)
	}
}
