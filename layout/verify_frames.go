package layout

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// frameCheck decompresses a compressed file's frames from its bytes as they are read, in
// order (verify reads each file once: its CRC32C and its frames in one pass), checking each
// frame as a read would (its CRC32C, then its length). It keeps the first damage met.
type frameCheck struct {
	frame   int64 // the manifest's frame size
	dec     *zstd.Decoder
	scratch []byte

	size, raw int64   // the file's bytes as stored and uncompressed
	head      []byte  // the header's bytes so far (its size follows from raw and frame)
	f         *Frames // the header, once read whole
	i         int     // the frame being read
	pend      []byte  // its bytes so far, where they came in more than one piece
	err       error
}

// newFrameCheck returns a frameCheck for the files of a dataset of frames of frame bytes.
func newFrameCheck(frame int64) (*frameCheck, error) {
	dec, err := NewFramesDecoder()
	if err != nil {
		return nil, err
	}
	return &frameCheck{frame: frame, dec: dec, scratch: make([]byte, ScratchSize(frame))}, nil
}

// reset starts on a file of size bytes stored, raw uncompressed.
func (c *frameCheck) reset(size, raw int64) {
	c.size, c.raw, c.f, c.i, c.err = size, raw, nil, 0, nil
	c.head = make([]byte, 0, min(size, FramesHeaderSize(raw, c.frame)))
	c.pend = c.pend[:0]
}

// add takes the file's next bytes.
func (c *frameCheck) add(b []byte) {
	for len(b) > 0 && c.err == nil {
		if c.f == nil {
			n := min(cap(c.head)-len(c.head), len(b))
			c.head, b = append(c.head, b[:n]...), b[n:]
			if len(c.head) == cap(c.head) {
				c.parse()
			}
			continue
		}
		if c.i >= len(c.f.Sizes) {
			c.err = fmt.Errorf("%w: bytes past the last frame", ErrFrames)
			return
		}
		size := int(c.f.Sizes[c.i])
		n := min(size-len(c.pend), len(b))
		src := b[:n]
		if len(c.pend) > 0 || n < size {
			c.pend = append(c.pend, src...)
			src = c.pend
		}
		b = b[n:]
		if len(src) == size {
			_, c.err = c.f.DecodeFrame(c.dec, c.i, src, c.scratch)
			c.i, c.pend = c.i+1, c.pend[:0]
		}
	}
}

// parse checks the header, once its bytes are in.
func (c *frameCheck) parse() {
	c.f, c.err = ParseFrames(c.head, c.size, c.raw)
	if c.err == nil && c.f.Frame != c.frame {
		c.err = fmt.Errorf("%w: the header's frame size is %d, the manifest's %d", ErrFrames, c.f.Frame, c.frame)
	}
}

// done returns the first damage met, or what the file lacks once every byte was added.
func (c *frameCheck) done() error {
	switch {
	case c.err != nil:
		return c.err
	case c.f == nil:
		return fmt.Errorf("%w: the file ends in its header", ErrFrames)
	case c.i < len(c.f.Sizes):
		return fmt.Errorf("%w: the file ends in frame %d of %d", ErrFrames, c.i, len(c.f.Sizes))
	}
	return nil
}
