package layout

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"

	"github.com/blockfs/blockfs/internal/parallel"
	"github.com/blockfs/blockfs/source"
)

// openChecks is how many blocks' files an open finds and checks at once.
const openChecks = 16

// packed is the shape of a packed dataset: the table of the files its manifest names, each
// found and checked in a Store when the dataset opened (OpenStore).
type packed struct {
	inOrder
	dir string // the Store's location
	// files[id] is the table entry of each FileID (Name "" when the block has no such file).
	files []File
}

func (p *packed) file(id FileID) (File, bool) {
	if id >= FileID(len(p.files)) || p.files[id].Name == "" {
		return File{Block: -1}, false
	}
	return p.files[id], true
}

func (p *packed) verifiable() error { return nil }

func (p *packed) where() string { return p.dir }

func (p *packed) inPlace() (string, int64, bool) { return "", 0, false }

// rowExtent implements rowSource: size bytes of rows from row on, in parts when they run
// across block files.
func (p *packed) rowExtent(row, size int64) source.Extent {
	var e source.Extent
	b, _ := p.starts.blockOf(uint64(row))
	for covered := int64(0); covered < size; b++ {
		f := p.files[DataFile(b)]
		skip := (row - int64(p.starts[b])) * p.recordSize
		take := min(int64(p.blockBytes(b))-skip, size-covered) // the rows' bytes, stored or not
		e.Parts = append(e.Parts, source.Extent{Name: f.Name, Offset: f.Offset + skip, Size: take, Ident: f.Ident})
		covered += take
		row += take / p.recordSize
	}
	if len(e.Parts) == 1 {
		return e.Parts[0]
	}
	e.Size = size
	return e
}

// newDataset checks the block files named by a validated manifest in st and builds the file
// table. With collect nil the first bad file is an error; otherwise each is passed to collect
// and its block is left out of the checks that follow (VerifyStore reports them all).
func newDataset(st Store, m *Manifest, collect func(block int, err error)) (*Dataset, error) {
	nb := len(m.Blocks)
	p := &packed{inOrder: newInOrder(nb, m.RecordSize), dir: st.Location(), files: make([]File, nb*numRoles+1)}
	d := &Dataset{Dir: st.Location(), Manifest: m, starts: p.starts, shape: p, store: st}
	src := st.Blocks(d) // reads the table as it fills
	files := make([][]File, nb)
	for i, b := range m.Blocks {
		p.starts[i+1] = p.starts[i] + b.Records
		if p.byteStart != nil {
			p.byteStart[i+1] = p.byteStart[i] + b.Bytes
		}
		files[i] = []File{{Extent: source.Extent{Name: b.File, Size: int64(b.Stored())}, Role: RoleData, CRC32C: b.CRC32C,
			Framed: b.StoredBytes != 0, Raw: int64(b.Bytes)}}
		d.framed = d.framed || b.StoredBytes != 0
		if b.IDsFile != "" {
			files[i] = append(files[i], File{Extent: source.Extent{Name: b.IDsFile, Size: 8 * int64(b.Records)}, Role: RoleIDs, CRC32C: b.IDsCRC32C})
		}
		if b.OffsetsFile != "" {
			files[i] = append(files[i], File{Extent: source.Extent{Name: b.OffsetsFile, Size: 8 * int64(b.Records+1)}, Role: RoleOffsets, CRC32C: b.OffsetsCRC32C})
		}
	}
	// Each block's files are found and checked side by side: in an object store or on a web
	// server that cannot list, each is a request (a HEAD, and a GET of a variable block's
	// offsets' ends), and one after the other they would take minutes for a dataset of many
	// blocks. Errors are taken in block order: without collect the first stops the checks
	// not started yet (Each starts blocks in order and waits for those it started, so every
	// block before it has its answer, and the error is the one a check in order would give);
	// with collect every block is checked.
	bad := make([]error, nb)
	_ = parallel.Each(context.Background(), nb, openChecks, func(_ context.Context, i int) error {
		for _, f := range files[i] {
			if bad[i] = p.addFile(st, i, f); bad[i] != nil {
				break
			}
		}
		if bad[i] == nil && m.Blocks[i].OffsetsFile != "" {
			bad[i] = d.checkOffsetsEnds(src, i)
		}
		if collect == nil {
			return bad[i]
		}
		return nil
	})
	for i, err := range bad {
		if err == nil {
			continue
		}
		if collect == nil {
			return nil, err
		}
		collect(i, err)
	}
	if m.Names != nil {
		f := File{Extent: source.Extent{Name: m.Names.File, Size: int64(m.Names.Bytes)}, Role: RoleNames, CRC32C: m.Names.CRC32C}
		if err := p.addFile(st, -1, f); err != nil {
			if collect == nil {
				return nil, err
			}
			collect(-1, err)
		}
	}
	return d, nil
}

// addFile checks the file f names (relative to the dataset) in st and enters it in the table,
// with the identity every later read checks (the manifest's CRC32C included).
func (p *packed) addFile(st Store, block int, f File) error {
	name, ident, err := checkFile(st, block, f.Name, uint64(f.Size))
	if err != nil {
		return err
	}
	ident.CRC32C, ident.HasCRC = f.CRC32C, true
	f.Name, f.Ident, f.Block, f.HasCRC = name, ident, block, true
	id := NamesFile(p.starts.blocks())
	if f.Role != RoleNames {
		id = RoleFile(block, f.Role)
	}
	p.files[id] = f
	return nil
}

// checkFile asks st where the file rel is and what it is, and checks that it is size bytes. It
// returns the backend's name for the file and its identity.
func checkFile(st Store, block int, rel string, size uint64) (string, source.Identity, error) {
	p := st.Path(rel)
	name, ident, err := st.Stat(rel)
	var le *Error
	switch {
	case errors.As(err, &le):
		le.Block = block
		return "", ident, le
	case errors.Is(err, fs.ErrNotExist):
		return "", ident, errorf(ErrCorrupt, p, block, "file is missing (the dataset is incomplete; re-pack it)")
	case err != nil:
		return "", ident, wrapf(ErrIO, err, p, block, "%v", err)
	case uint64(ident.Size) != size:
		return "", ident, errorf(ErrCorrupt, p, block, "file is %d bytes, the manifest says %d (truncated or replaced? re-pack the dataset)", ident.Size, size)
	}
	return name, ident, nil
}

// checkOffsetsEnds reads the first and last entry of a block's offsets index from src.
func (d *Dataset) checkOffsetsEnds(src source.Blocks, block int) error {
	id := OffsetsFile(block)
	var first, last [8]byte
	if err := src.Fill(context.Background(), id, 0, [][]byte{first[:]}, source.Read{}); err != nil {
		return d.ioError(id, err)
	}
	if err := src.Fill(context.Background(), id, d.Size(id)-8, [][]byte{last[:]}, source.Read{}); err != nil {
		return d.ioError(id, err)
	}
	f, l := binary.LittleEndian.Uint64(first[:]), binary.LittleEndian.Uint64(last[:])
	if f != 0 || l != d.BlockBytes(block) {
		return errorf(ErrCorrupt, d.Path(id), block, "offsets index runs from %d to %d, want 0 to %d", f, l, d.BlockBytes(block))
	}
	return nil
}
