package layout

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"

	"github.com/blockfs/blockfs/internal/crc32c"
	"github.com/blockfs/blockfs/internal/parallel"
)

// Compressed blocks (blockfs pack --compress; docs/FORMAT.md "Compressed blocks").
//
// A compressed block's file is a header, then its frames:
//
//	magic   "BFZ1"
//	frame   uint32 LE: the uncompressed bytes of every frame but the last (a multiple of 4096)
//	raw     uint64 LE: the block's uncompressed bytes; n = ceil(raw / frame) frames
//	n times size uint32 LE, crc32c uint32 LE: frame i's compressed bytes and their CRC32C
//	crc32c  uint32 LE: of the header's bytes before it
//
// and frame i, at the header's size plus the sizes of the frames before it, is one zstd frame
// (RFC 8878) of the block's bytes [i*frame, min((i+1)*frame, raw)). A read decompresses only the
// frames it touches, each checked against its CRC32C before it is decompressed and against its
// length after.

// framesMagic opens a compressed block's file.
const framesMagic = "BFZ1"

// framesFixed is the header's bytes beside its per-frame entries: magic, frame, raw, crc32c.
const framesFixed = 4 + 4 + 8 + 4

// ErrFrames says a compressed block's header or frame is not what it must be.
var ErrFrames = errors.New("compressed block corrupt")

// Frames is the parsed header of a compressed block's file. Immutable.
type Frames struct {
	Frame int64    // uncompressed bytes of every frame but the last
	Raw   int64    // the block's uncompressed bytes
	Sizes []uint32 // each frame's compressed bytes
	CRCs  []uint32 // each frame's CRC32C
	at    []int64  // at[i]: frame i's offset in the file; at[n] the file's size
}

// FramesHeaderSize returns the header's bytes for a block of raw bytes cut in frames of frame.
func FramesHeaderSize(raw, frame int64) int64 { return framesFixed + 8*frameCount(raw, frame) }

func frameCount(raw, frame int64) int64 { return (raw + frame - 1) / frame }

// FramesBound returns the most bytes the frames of raw bytes in frames of frame compress to
// (zstd's bound, ZSTD_COMPRESSBOUND, per frame): a manifest claiming more is refused.
func FramesBound(raw, frame int64) uint64 {
	return uint64(raw + raw>>8 + 64*frameCount(raw, frame))
}

// EncodeFrames returns the compressed file of a block of raw bytes: its header and its frames
// of frame bytes each (a multiple of 4096), compressed by enc, up to par frames at once (enc
// must allow as many concurrent EncodeAll calls to gain from it).
func EncodeFrames(raw []byte, frame int64, enc *zstd.Encoder, par int) []byte {
	n := frameCount(int64(len(raw)), frame)
	frames := make([][]byte, n)
	_ = parallel.Each(context.Background(), int(n), par, func(_ context.Context, i int) error {
		frames[i] = enc.EncodeAll(raw[int64(i)*frame:min(int64(i+1)*frame, int64(len(raw)))], nil)
		return nil
	})
	sizes, crcs := make([]uint32, n), make([]uint32, n)
	size := FramesHeaderSize(int64(len(raw)), frame)
	for i, f := range frames {
		sizes[i], crcs[i] = uint32(len(f)), CRC32C(f)
		size += int64(len(f))
	}
	head := framesHead(int64(len(raw)), frame, sizes, crcs)
	out := make([]byte, 0, size)
	out = append(out, head...)
	for _, f := range frames {
		out = append(out, f...)
	}
	return out
}

// framesHead returns the header of a block of raw bytes whose frames have these compressed
// sizes and CRC32Cs.
func framesHead(raw, frame int64, sizes, crcs []uint32) []byte {
	head := make([]byte, FramesHeaderSize(raw, frame))
	copy(head, framesMagic)
	binary.LittleEndian.PutUint32(head[4:], uint32(frame))
	binary.LittleEndian.PutUint64(head[8:], uint64(raw))
	for i := range sizes {
		binary.LittleEndian.PutUint32(head[16+8*i:], sizes[i])
		binary.LittleEndian.PutUint32(head[20+8*i:], crcs[i])
	}
	binary.LittleEndian.PutUint32(head[len(head)-4:], CRC32C(head[:len(head)-4]))
	return head
}

// readRecordPart fills b from r, part of a record of n bytes: a record that ends early is
// io.ErrUnexpectedEOF saying so; any other error is the input's own, as the raw path returns it.
func readRecordPart(r io.Reader, b []byte, n int64) error {
	_, err := io.ReadFull(r, b)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("the record ended before its %d bytes: %w", n, io.ErrUnexpectedEOF)
	}
	return err
}

// WriteFramesFrom writes the compressed file of the n raw bytes read from r to f (at offset
// 0, empty), a frame at a time: the header's room first, then each frame, then the header.
// It returns the file's size and CRC32C.
func WriteFramesFrom(f *os.File, r io.Reader, n, frame int64, enc *zstd.Encoder) (int64, uint32, error) {
	head, count := FramesHeaderSize(n, frame), frameCount(n, frame)
	sizes, crcs := make([]uint32, count), make([]uint32, count)
	buf := make([]byte, min(n, frame))
	at, crc := head, uint32(0)
	for i := range sizes {
		k := min(frame, n-int64(i)*frame)
		if err := readRecordPart(r, buf[:k], n); err != nil {
			return 0, 0, err
		}
		comp := enc.EncodeAll(buf[:k], nil)
		if _, err := f.WriteAt(comp, at); err != nil {
			return 0, 0, err
		}
		at += int64(len(comp))
		crc = crc32c.Update(crc, comp)
		sizes[i], crcs[i] = uint32(len(comp)), CRC32C(comp)
	}
	h := framesHead(n, frame, sizes, crcs)
	if _, err := f.WriteAt(h, 0); err != nil {
		return 0, 0, err
	}
	return at, crc32c.Combine(CRC32C(h), crc, at-head), nil
}

// ParseFrames parses the header at the start of b, a compressed block's file of fileSize bytes
// holding raw uncompressed bytes (from the manifest): its CRC32C, its frame size, its frames'
// sizes adding up to the file's. b must hold the header (FramesHeaderSize).
func ParseFrames(b []byte, fileSize, raw int64) (*Frames, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrFrames, fmt.Sprintf(format, args...))
	}
	if len(b) < framesFixed || string(b[:4]) != framesMagic {
		return nil, bad("no %q header", framesMagic)
	}
	f := &Frames{Frame: int64(binary.LittleEndian.Uint32(b[4:])), Raw: int64(binary.LittleEndian.Uint64(b[8:]))}
	if f.Frame <= 0 || f.Frame%4096 != 0 {
		return nil, bad("frame size %d is not a positive multiple of 4096", f.Frame)
	}
	if f.Raw != raw {
		return nil, bad("the header says %d uncompressed bytes, the manifest %d", f.Raw, raw)
	}
	n := frameCount(f.Raw, f.Frame)
	head := FramesHeaderSize(f.Raw, f.Frame)
	if int64(len(b)) < head || head > fileSize {
		return nil, bad("a header of %d frames (%d bytes) is longer than the %d bytes given of a file of %d", n, head, len(b), fileSize)
	}
	if got, want := CRC32C(b[:head-4]), binary.LittleEndian.Uint32(b[head-4:]); got != want {
		return nil, bad("header CRC32C %08x, want %08x", got, want)
	}
	f.Sizes, f.CRCs, f.at = make([]uint32, n), make([]uint32, n), make([]int64, n+1)
	f.at[0] = head
	for i := int64(0); i < n; i++ {
		f.Sizes[i] = binary.LittleEndian.Uint32(b[16+8*i:])
		f.CRCs[i] = binary.LittleEndian.Uint32(b[20+8*i:])
		f.at[i+1] = f.at[i] + int64(f.Sizes[i])
	}
	if f.at[n] != fileSize {
		return nil, bad("frames of %d bytes and a header of %d make %d bytes, the file has %d", f.at[n]-head, head, f.at[n], fileSize)
	}
	return f, nil
}

// At returns where frame i starts in the file; At(len(Sizes)) is the file's size.
func (f *Frames) At(i int) int64 { return f.at[i] }

// FramesHeaderLen returns the size of the header that b, the first bytes of a compressed file
// of raw uncompressed bytes, begins (it follows from the header's frame size), and false where
// b does not begin one (ParseFrames then says why).
func FramesHeaderLen(b []byte, raw int64) (int64, bool) {
	if len(b) < framesFixed || string(b[:4]) != framesMagic {
		return 0, false
	}
	frame := int64(binary.LittleEndian.Uint32(b[4:]))
	if frame <= 0 {
		return 0, false
	}
	return FramesHeaderSize(raw, frame), true
}

// frameLen returns frame i's uncompressed bytes.
func (f *Frames) frameLen(i int) int64 { return min(f.Frame, f.Raw-int64(i)*f.Frame) }

// Span returns the frames [first, last] that hold the uncompressed bytes [off, off+n) (n > 0,
// within Raw) and where their compressed bytes are in the file: size bytes from at.
func (f *Frames) Span(off, n int64) (first, last int, at, size int64) {
	first, last = int(off/f.Frame), int((off+n-1)/f.Frame)
	return first, last, f.at[first], f.at[last+1] - f.at[first]
}

// DecodeFrame decompresses frame i, src its compressed bytes, into scratch (ScratchSize) and
// returns its uncompressed bytes, there: its CRC32C checked before, its length after; dec must
// bound a frame's memory (NewFramesDecoder). The caller copies them out: zstd decodes about 1.4
// times faster with room past a frame's end than into a buffer of its exact size (the page).
func (f *Frames) DecodeFrame(dec *zstd.Decoder, i int, src, scratch []byte) ([]byte, error) {
	if got := CRC32C(src); got != f.CRCs[i] {
		return nil, fmt.Errorf("%w: frame %d CRC32C %08x, want %08x", ErrFrames, i, got, f.CRCs[i])
	}
	want := f.frameLen(i)
	got, err := dec.DecodeAll(src, scratch[:0])
	if err != nil {
		return nil, fmt.Errorf("%w: frame %d: %v", ErrFrames, i, err)
	}
	if int64(len(got)) != want || want > 0 && &got[0] != &scratch[0] {
		return nil, fmt.Errorf("%w: frame %d holds %d bytes, want %d", ErrFrames, i, len(got), want)
	}
	return got, nil
}

// decodeSlack is the room past a frame's end that lets zstd decode at its fast pace.
const decodeSlack = 128 << 10

// ScratchSize returns the bytes of DecodeFrame's scratch for frames of frame bytes.
func ScratchSize(frame int64) int64 { return frame + decodeSlack }

// NewFramesDecoder returns a zstd decoder for DecodeFrame that decompresses no frame past its
// scratch (ScratchSize(frame) bytes: a frame that claims or makes more is an error, not an
// allocation), whatever window the frame declares.
func NewFramesDecoder() (*zstd.Decoder, error) {
	// A frame's own content checksum (xxhash), where a writer added one, is not checked: its
	// CRC32C was, before it was decompressed, and its length after. DecodeAll decodes into the
	// scratch, its history included, so a frame's window (the zstd command declares 8 MiB or
	// more for a frame of 1 MiB) costs nothing: the cap on the scratch bounds the memory, not
	// the window.
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(maxFrameWindow), zstd.WithDecoderMaxWindow(maxFrameWindow), zstd.IgnoreChecksum(true))
}

// maxFrameWindow is the largest window a frame may declare: zstd's own bound on 64-bit
// machines (window log 31).
const maxFrameWindow = 1 << 31
