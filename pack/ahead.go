package pack

import (
	"errors"
	"io"

	"github.com/blockfs/blockfs/internal/odirect"
)

// aheadReader reads a stream on a goroutine of its own, up to depth chunks of size bytes ahead
// of its reader, so that the reading (the disk, the network) and the work on what was read
// (blockfs index's parsing and CRC32C) overlap. Close stops the goroutine once the underlying
// reader returns (close that one after, to end a read in progress).
type aheadReader struct {
	ch   chan aheadChunk
	free chan []byte
	stop chan struct{}
	cur  []byte // unread bytes of buf
	buf  []byte // the chunk being read, returned to free when done
	err  error
}

type aheadChunk struct {
	b   []byte
	err error
}

func newAheadReader(r io.Reader, size, depth int) *aheadReader {
	a := &aheadReader{ch: make(chan aheadChunk, depth), free: make(chan []byte, depth+1), stop: make(chan struct{})}
	for range depth + 1 {
		a.free <- odirect.AlignedBuf(size) // a file open with O_DIRECT reads into it
	}
	go a.fill(r)
	return a
}

func (a *aheadReader) fill(r io.Reader) {
	defer close(a.ch)
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.stop:
			return
		}
		n, err := io.ReadFull(r, b)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		c := aheadChunk{b: b[:n], err: err}
		select {
		case a.ch <- c:
		case <-a.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read implements io.Reader.
func (a *aheadReader) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.buf != nil {
			a.free <- a.buf[:cap(a.buf)]
			a.buf = nil
		}
		if a.err != nil {
			return 0, a.err
		}
		c, ok := <-a.ch
		if !ok {
			a.err = io.EOF
			continue
		}
		a.cur, a.buf, a.err = c.b, c.b, c.err
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// Close stops reading ahead.
func (a *aheadReader) Close() { close(a.stop) }
