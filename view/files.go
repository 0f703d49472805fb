package view

import (
	"encoding/binary"
	"io"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/layout"
)

// File is one served file: a ReaderAt of known, exact size. ReadAt follows io.ReaderAt: at
// the end of the file it returns fewer bytes and io.EOF; any other error means nothing in p is
// to be trusted.
type File interface {
	io.ReaderAt
	Size() int64
	// prefetch asks for the disk data of the windows ahead of byte offset off; see Reader.
	prefetch(off int64, ahead int64, next *int)
}

// Kind of a served file.
type Kind int

const (
	Data    Kind = iota // the records' bytes
	IDs                 // uint64 LE source id per record
	Offsets             // uint64 LE byte offset per record, plus the end (variable-length only)
	Names               // the dataset's names file, by source id
	numKinds
)

// NumKinds is the number of Kinds.
const NumKinds = int(numKinds)

// OpenNames returns the dataset's names file (one source name per line, in source id order),
// read through the cache, or false if the dataset has none.
func OpenNames(ds *layout.Dataset, c *cache.Cache) (File, bool) {
	id, ok := ds.Names()
	if !ok {
		return nil, false
	}
	return &plainFile{c: c, id: cache.FileID(id), size: ds.Size(id)}, true
}

// plainFile serves one dataset file as it is.
type plainFile struct {
	c    *cache.Cache
	id   cache.FileID
	size int64
}

func (f *plainFile) Size() int64 { return f.size }

func (f *plainFile) ReadAt(p []byte, off int64) (int, error) {
	n := clamp(p, off, f.size)
	if n == 0 {
		return 0, eofIf(0, len(p))
	}
	if _, err := f.c.ReadAt(f.id, p[:n], off); err != nil {
		return 0, err
	}
	return n, eofIf(n, len(p))
}

func (f *plainFile) prefetch(off, ahead int64, next *int) {}

// Open returns the file of kind k over positions rg of the epoch.
func (e *Epoch) Open(k Kind, rg Range) (File, error) {
	switch k {
	case IDs:
		return &idsFile{e: e, rg: rg}, nil
	case Offsets:
		base, err := e.byteOf(rg.Start)
		if err != nil {
			return nil, err
		}
		return &offsetsFile{e: e, rg: rg, base: base}, nil
	default:
		base, err := e.byteOf(rg.Start)
		if err != nil {
			return nil, err
		}
		end, err := e.byteOf(rg.End)
		if err != nil {
			return nil, err
		}
		return &dataFile{e: e, rg: rg, base: base, size: int64(end - base)}, nil
	}
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

type dataFile struct {
	e    *Epoch
	rg   Range
	base uint64 // epoch byte offset of the range's first record
	size int64
}

func (f *dataFile) Size() int64 { return f.size }

// ReadAt copies the records overlapping [off, off+len(p)) into p.
func (f *dataFile) ReadAt(p []byte, off int64) (int, error) {
	n := clamp(p, off, f.size)
	if n == 0 {
		return 0, eofIf(0, len(p))
	}
	g := NewGather()
	defer g.Release()
	if err := f.gatherData(g, p, off, n); err != nil {
		return 0, err
	}
	if !g.InBuf(p) {
		g.CopyTo(p)
	}
	return n, eofIf(n, len(p))
}

func (f *dataFile) prefetch(off, ahead int64, next *int) {
	f.e.prefetch(f.base+uint64(off), uint64(ahead), next, layout.RoleData)
}

type idsFile struct {
	e  *Epoch
	rg Range
}

func (f *idsFile) Size() int64 { return 8 * int64(f.rg.Len()) }

// ReadAt fills p with the uint64 LE source ids of the records overlapping [off, off+len(p)).
func (f *idsFile) ReadAt(p []byte, off int64) (int, error) {
	return readTable(p, off, f.Size(), func(first uint64, vals []uint64) error {
		g := NewGather()
		defer g.Release()
		return f.fillIDs(g, first, vals)
	})
}

func (f *idsFile) prefetch(off, ahead int64, next *int) {
	if f.e.ds.HasIDs() {
		f.e.prefetch(8*(f.rg.Start+uint64(off)/8), uint64(ahead), next, layout.RoleIDs)
	}
}

// readTable serves a ReadAt on a file of uint64 LE values: it asks fill for the values
// overlapping [off, off+len(p)) (the first one's index, and a slice to fill) and copies their
// bytes out.
func readTable(p []byte, off, size int64, fill func(first uint64, vals []uint64) error) (int, error) {
	n := clamp(p, off, size)
	if n == 0 {
		return 0, eofIf(0, len(p))
	}
	first := uint64(off) / 8
	last := (uint64(off) + uint64(n) - 1) / 8
	vals := make([]uint64, last-first+1)
	if err := fill(first, vals); err != nil {
		return 0, err
	}
	buf := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(buf[8*i:], v)
	}
	copy(p[:n], buf[uint64(off)-8*first:])
	return n, eofIf(n, len(p))
}

type offsetsFile struct {
	e    *Epoch
	rg   Range
	base uint64
}

func (f *offsetsFile) Size() int64 { return 8 * int64(f.rg.Len()+1) }

// ReadAt fills p with the uint64 LE offsets, relative to the range's first record, of the
// records overlapping [off, off+len(p)), and after the last record the range's size.
func (f *offsetsFile) ReadAt(p []byte, off int64) (int, error) {
	return readTable(p, off, f.Size(), func(first uint64, vals []uint64) error {
		start, err := f.e.byteOf(f.rg.Start + first)
		if err != nil {
			return err
		}
		at := start - f.base
		vals[0] = at
		if first == f.rg.Len() {
			return nil
		}
		return f.e.walk(f.rg.Start+first, func(pos uint64, r record) bool {
			at += r.length
			i := pos - f.rg.Start - first + 1
			if i < uint64(len(vals)) {
				vals[i] = at
			}
			return i+1 < uint64(len(vals)) && pos+1 < f.rg.End
		})
	})
}

func (f *offsetsFile) prefetch(off, ahead int64, next *int) {}
