package layout

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/klauspost/compress/zstd"
)

// DefaultFrame is the uncompressed bytes of a compressed block's frames: a cache page, so a
// page's load decompresses one frame.
const DefaultFrame = 1 << 20

// DefaultLevel is the zstd level of pack --compress zstd (zstd's own default).
const DefaultLevel = 3

// KeepRawRatio: a trial of the first block that compresses to more than this share of its
// bytes keeps the dataset (or field) raw: decompressing it would cost reads for nothing.
const KeepRawRatio = 0.9

// trialBytes is the most of a first block the trial compresses; MinTrial the least: blocks
// written before one holds that much stay raw (a few bytes tell nothing of the data).
const (
	trialBytes = 4 << 20
	MinTrial   = 4096
)

// compressor is a Writer's compression of block data files (WriterOptions.Compress): the
// encoder, and the trial on the first data written that may keep the dataset raw. Its state
// is the background writer's until bg.Stop returns.
type compressor struct {
	opt    Compression
	enc    *zstd.Encoder
	par    int
	tried  bool    // a block of MinTrial bytes or more was tried
	raw    bool    // the trial kept the dataset raw, or no block was tried
	ratio  float64 // the trial's compressed / raw
	stored []uint64
}

// newCompressor returns the compressor for opt (nil: blocks are written raw).
func newCompressor(opt *Compression) (*compressor, error) {
	if opt == nil {
		return nil, nil
	}
	c := &compressor{opt: *opt, par: runtime.GOMAXPROCS(0)}
	if c.opt.Codec != CodecZstd {
		return nil, fmt.Errorf("unknown compression codec %q (want %q)", c.opt.Codec, CodecZstd)
	}
	if c.opt.Level == 0 {
		c.opt.Level = DefaultLevel
	}
	if c.opt.Level < 1 || c.opt.Level > 22 {
		return nil, fmt.Errorf("zstd level %d is out of range (1 to 22)", c.opt.Level)
	}
	if c.opt.Frame == 0 {
		c.opt.Frame = DefaultFrame
	}
	if c.opt.Frame%4096 != 0 || c.opt.Frame < 4096 || c.opt.Frame > MaxFrame {
		return nil, fmt.Errorf("frame size %d is not a multiple of 4096 from 4096 to %d", c.opt.Frame, MaxFrame)
	}
	var err error
	// Literals are entropy-coded even in a block without matches: klauspost's levels below 6
	// otherwise store such a block raw (numbers with few repeats, floats of small integers:
	// 100% where libzstd's level 3 gives 69%).
	c.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(c.opt.Level)),
		zstd.WithEncoderConcurrency(c.par), zstd.WithLowerEncoderMem(true), zstd.WithAllLitEntropyCompression(true),
		zstd.WithEncoderCRC(false)) // each frame has a CRC32C in the header: no xxhash of its own
	return c, err
}

// try decides, on the first data written, whether the dataset is compressed: data (the first
// frames of the first block) must shrink to KeepRawRatio of its bytes.
func (c *compressor) try(data []byte) {
	if c.tried || len(data) < MinTrial {
		return
	}
	c.tried = true
	comp := EncodeFrames(data[:min(len(data), trialBytes)], c.opt.Frame, c.enc, c.par)
	c.ratio = float64(len(comp)) / float64(min(len(data), trialBytes))
	c.raw = c.ratio > KeepRawRatio
}

// setStored records block's stored size (0: raw).
func (c *compressor) setStored(block int, n uint64) {
	for len(c.stored) <= block {
		c.stored = append(c.stored, 0)
	}
	c.stored[block] = n
}

// writeData writes a block's data file from data: compressed unless the trial kept the
// dataset raw. It returns the file's CRC32C. Background writer only.
func (c *compressor) writeData(path string, block int, data []byte) (uint32, error) {
	c.try(data)
	if c.raw || !c.tried {
		// Kept raw, or not tried yet (a block too small to try is kept raw: a later trial
		// may keep every block raw).
		return CRC32C(data), writeFile(path, data)
	}
	out := EncodeFrames(data, c.opt.Frame, c.enc, c.par)
	c.setStored(block, uint64(len(out)))
	return CRC32C(out), writeFile(path, out)
}

// copyData writes a block's data file from the n bytes of r (a record alone in its block),
// a frame at a time: compressed unless the trial kept the dataset raw. It returns the file's
// CRC32C. Background writer only.
func (c *compressor) copyData(path string, block int, r io.Reader, n int64) (uint32, error) {
	var first []byte
	if !c.tried && n >= MinTrial {
		first = make([]byte, min(n, c.opt.Frame))
		if err := readRecordPart(r, first, n); err != nil {
			return 0, fmt.Errorf("writing %s: %w", path, err)
		}
		c.try(first)
		r = io.MultiReader(bytes.NewReader(first), r)
	}
	if c.raw || !c.tried {
		return writeFileFrom(path, r, n)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	size, crc, err := WriteFramesFrom(f, r, n, c.opt.Frame, c.enc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("writing %s: %w", path, err)
	}
	c.setStored(block, uint64(size))
	return crc, nil
}

// finish enters the stored sizes and the compression in m once every block is written, or
// leaves m raw when the trial kept it so.
func (c *compressor) finish(m *Manifest) {
	if c == nil {
		return
	}
	if !c.tried {
		c.raw = true // every block too small to try
	}
	if c.raw {
		return
	}
	for i := range m.Blocks {
		if i < len(c.stored) {
			m.Blocks[i].StoredBytes = c.stored[i]
		}
	}
	opt := c.opt
	m.Compression, m.Version = &opt, VersionCompressed
}

// CompressResult says what became of WriterOptions.Compress once the writer committed: the
// trial's ratio (compressed / raw bytes of the first block's first frames; 0 when no block
// was large enough to try), and whether the dataset was kept raw. ok is false without
// Compress.
func (w *Writer) CompressResult() (ratio float64, raw, ok bool) {
	if w.comp == nil {
		return 0, false, false
	}
	return w.comp.ratio, w.comp.raw, true
}
