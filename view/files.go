package view

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
)

// File is one served file of known, exact size. ReadAt follows io.ReaderAt: at the end of
// the file it returns fewer bytes and io.EOF; any other error means nothing in p is to be
// trusted. Reader.Gather serves the same bytes without a copy where it can.
type File interface {
	io.ReaderAt
	Size() int64
	// gather serves [off, off+len(buf)) clamped to the file as slices in g (see Reader.Gather).
	gather(rc call, g *Gather, buf []byte, off int64) (int, error)
}

// Kind of a served file.
type Kind int

const (
	Data    Kind = iota // the records' bytes
	IDs                 // uint64 LE source id per record
	Offsets             // uint64 LE byte offset per record, plus the end (variable-length only)
	Names               // the dataset's names file, by source id
	Sources             // uint16 LE index of each record's source in a mixture
	numKinds
)

// NumKinds is the number of Kinds.
const NumKinds = int(numKinds)

// readAt serves an io.ReaderAt read of f through its gather, copying the slices into p.
func readAt(f File, p []byte, off int64) (int, error) {
	g := NewGather()
	defer g.Release()
	n, err := f.gather(background(), g, p, off)
	if err != nil {
		return 0, err
	}
	if !g.InBuf(p) {
		g.CopyTo(p)
	}
	return n, eofIf(n, len(p))
}

// readFull fills p from f at off under rc, or fails.
func readFull(rc call, f File, p []byte, off int64) error {
	g := NewGather()
	defer g.Release()
	n, err := f.gather(rc, g, p, off)
	if err != nil {
		return err
	}
	if n != len(p) {
		return fmt.Errorf("view: read %d of %d bytes at %d", n, len(p), off)
	}
	if !g.InBuf(p) {
		g.CopyTo(p)
	}
	return nil
}

// clamp applies the ReaderAt bounds: it returns how many bytes of p a read at off may fill.
func clamp(p []byte, off, size int64) int {
	if off >= size || off < 0 {
		return 0
	}
	return int(min(int64(len(p)), size-off))
}

func eofIf(n, want int) error {
	if n < want {
		return io.EOF
	}
	return nil
}

// OpenNames returns the dataset's names file (one source name per line, in source id order),
// read through the cache, or false if the dataset has none.
func OpenNames(ds *layout.Dataset, c *cache.Cache) (File, bool) {
	id, ok := ds.Names()
	if !ok {
		return nil, false
	}
	return &plainFile{c: c, id: id, size: ds.Size(id)}, true
}

// plainFile serves one dataset file as it is.
type plainFile struct {
	c    *cache.Cache
	id   layout.FileID
	size int64
}

func (f *plainFile) Size() int64 { return f.size }

func (f *plainFile) ReadAt(p []byte, off int64) (int, error) { return readAt(f, p, off) }

func (f *plainFile) gather(rc call, g *Gather, buf []byte, off int64) (int, error) {
	n := clamp(buf, off, f.size)
	if n == 0 {
		return 0, nil
	}
	if err := f.c.Fill(rc.ctx, rc.waits, f.id, off, buf[:n]); err != nil {
		return 0, err
	}
	g.Vecs = append(g.Vecs, buf[:n])
	return n, nil
}

// dataFile is the records of a range of an epoch, in its order.
type dataFile struct {
	e    *Epoch
	base uint64 // epoch byte offset of the range's first record
	size int64
}

func (f *dataFile) Size() int64 { return f.size }

// ReadAt copies the records overlapping [off, off+len(p)) into p.
func (f *dataFile) ReadAt(p []byte, off int64) (int, error) { return readAt(f, p, off) }

func (f *dataFile) gather(rc call, g *Gather, buf []byte, off int64) (int, error) {
	n := clamp(buf, off, f.size)
	if n == 0 {
		return 0, nil
	}
	return n, f.gatherData(rc, g, buf, off, n)
}

// idsFile is the source ids of a range of an epoch's records.
type idsFile struct {
	e  *Epoch
	rg Range
}

func (f *idsFile) Size() int64 { return 8 * int64(f.rg.Len()) }

// ReadAt fills p with the uint64 LE source ids of the records overlapping [off, off+len(p)).
func (f *idsFile) ReadAt(p []byte, off int64) (int, error) { return readAt(f, p, off) }

func (f *idsFile) gather(rc call, g *Gather, buf []byte, off int64) (int, error) {
	n, err := readTable(buf, off, f.Size(), 8, func(first uint64, vals []uint64) error {
		return f.fillIDs(rc, g, first, vals) // leaves g reset after each chunk
	})
	if n > 0 && err == nil {
		g.Vecs = append(g.Vecs, buf[:n])
	}
	return n, err
}

// readTable serves a read of a file of little-endian values of width bytes (8: uint64, 2:
// uint16) into buf: it asks fill for the values overlapping [off, off+len(buf)) clamped to
// size, a run of at most tableChunk at a time (the first one's index, and a slice to fill),
// and copies their bytes out. It returns how many bytes it filled. Its memory is a chunk's,
// whatever the read's size.
func readTable(buf []byte, off, size int64, width int, fill func(first uint64, vals []uint64) error) (int, error) {
	n := clamp(buf, off, size)
	if n == 0 {
		return 0, nil
	}
	w := uint64(width)
	first := uint64(off) / w
	last := (uint64(off) + uint64(n) - 1) / w
	vals := make([]uint64, min(tableChunk, last-first+1))
	raw := make([]byte, width*len(vals))
	skip := uint64(off) - w*first // bytes of the first value before off
	at := 0
	for i := first; i <= last; {
		k := min(uint64(len(vals)), last-i+1)
		if err := fill(i, vals[:k]); err != nil {
			return 0, err
		}
		for j, v := range vals[:k] {
			if width == 2 {
				binary.LittleEndian.PutUint16(raw[2*j:], uint16(v))
			} else {
				binary.LittleEndian.PutUint64(raw[8*j:], v)
			}
		}
		at += copy(buf[at:n], raw[skip:uint64(k)*w])
		skip = 0
		i += k
	}
	return n, nil
}

// tableChunk is how many values readTable asks fill for at once.
const tableChunk = 4096

// offsetsFile is the byte offsets of a range of a variable-length epoch's records.
type offsetsFile struct {
	e    *Epoch
	rg   Range
	base uint64
}

func (f *offsetsFile) Size() int64 { return 8 * int64(f.rg.Len()+1) }

// ReadAt fills p with the uint64 LE offsets, relative to the range's first record, of the
// records overlapping [off, off+len(p)), and after the last record the range's size.
func (f *offsetsFile) ReadAt(p []byte, off int64) (int, error) { return readAt(f, p, off) }

func (f *offsetsFile) gather(rc call, g *Gather, buf []byte, off int64) (int, error) {
	n, err := readTable(buf, off, f.Size(), 8, func(first uint64, vals []uint64) error {
		start, err := f.e.byteOf(rc, f.rg.Start+first)
		if err != nil {
			return err
		}
		at := start - f.base
		vals[0] = at
		if first == f.rg.Len() {
			return nil
		}
		return f.e.walk(rc, f.rg.Start+first, func(pos uint64, r record) bool {
			at += r.length
			i := pos - f.rg.Start - first + 1
			if i < uint64(len(vals)) {
				vals[i] = at
			}
			return i+1 < uint64(len(vals)) && pos+1 < f.rg.End
		})
	})
	if n > 0 && err == nil {
		g.Vecs = append(g.Vecs, buf[:n])
	}
	return n, err
}
