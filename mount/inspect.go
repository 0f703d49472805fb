package mount

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path"
	"slices"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/source/stack"
	"github.com/blockfs/blockfs/view"
)

// What blockfs order and info read of opened data (Data) and of a mount's tree.

// The names of a mount's own files, under its mount point: MetaDir/InfoName is its info.json.
const (
	MetaDir  = view.MetaDir
	InfoName = view.InfoName
)

// Column is a file of an epoch with a value per record that blockfs order prints.
type Column int

const (
	IDs     Column = iota // epoch-NNNN.ids: each record's id in its dataset, uint64 little-endian
	Sources               // a mixture's epoch-NNNN.source: each record's source, uint16 little-endian
)

// kind returns the tree's kind of the column's file.
func (c Column) kind() view.Kind {
	if c == Sources {
		return view.Sources
	}
	return view.IDs
}

// Shard is slice R of W of an epoch (the tree's shard-R-of-W); W 0 is the whole epoch.
type Shard struct{ R, W uint64 }

// Positions returns the positions [lo, hi) of an epoch of n records the shard covers
// (view.ShardRange: the remainder at the end of the epoch belongs to no shard).
func (s Shard) Positions(n uint64) (lo, hi uint64) {
	if s.W == 0 {
		return 0, n
	}
	rg := view.ShardRange(n, s.R, s.W)
	return rg.Start, rg.End
}

// ColumnFile returns where column c of epoch n is in a mount's tree, relative to its mount
// point: epoch-0003.ids, or shard-1-of-4/epoch-0003.ids for a shard.
func ColumnFile(n uint64, c Column, s Shard) string {
	name := view.EpochFile(n, c.kind())
	if s.W == 0 {
		return name
	}
	return path.Join(view.ShardDir(s.R, s.W), name)
}

// columnAhead is how far a column is read ahead of its reader (one dataset's).
const columnAhead = 8 << 20

// Records returns the records of epoch n.
func (d *Data) Records(n uint64) (uint64, error) {
	t, err := d.tree()
	if err != nil {
		return 0, err
	}
	return t.Records(n)
}

// Column returns column c over shard s of epoch n as a mount of the data serves it, read
// through the stack: one dataset's (or fields') ids read ahead a few MiB, a mixture's as they
// are asked for.
func (d *Data) Column(n uint64, c Column, s Shard) (io.Reader, error) {
	t, err := d.tree()
	if err != nil {
		return nil, err
	}
	records, err := t.Records(n)
	if err != nil {
		return nil, err
	}
	lo, hi := s.Positions(records)
	f, err := t.Open(context.Background(), n, c.kind(), view.Range{Start: lo, End: hi})
	if err != nil {
		return nil, err
	}
	ahead := int64(columnAhead)
	if d.p.mix != nil {
		ahead = 0
	}
	return io.NewSectionReader(view.NewReader(f, ahead), 0, f.Size()), nil
}

// Dataset returns the dataset opened: nil for a dataset with fields or a mixture.
func (d *Data) Dataset() *layout.Dataset { return d.p.ds }

// Fields returns a dataset with fields' manifest and its fields' datasets, by field; a nil
// manifest for other data.
func (d *Data) Fields() (*layout.FieldsManifest, []*layout.Dataset) {
	if d.p.fields == nil {
		return nil, nil
	}
	return d.p.fields.man, d.p.fields.datasets()
}

// Order returns the dataset whose order the data is served in, and that order (Mix chosen):
// a dataset's own, or a dataset with fields' largest field's, which every field is served in.
// The dataset is nil for a mixture (Source).
func (d *Data) Order() (*layout.Dataset, shuffle.Options) {
	if f := d.p.fields; f != nil {
		big := f.srcs[f.big]
		return big.ds, big.opt.Order
	}
	return d.p.ds, d.p.opt.Order
}

// Mixture returns a mixture's order (nil for other data) and, when every source has fixed
// records of one size, that size (else 0). It builds the mixture's epochs, which checks them.
func (d *Data) Mixture() (*shuffle.Mixture, int64, error) {
	if d.p.mix == nil {
		return nil, 0, nil
	}
	t, err := d.tree()
	if err != nil {
		return nil, 0, err
	}
	var rs int64
	if m, ok := t.(*view.Mixture); ok {
		rs = m.RecordSize()
	}
	return d.p.mix.order, rs, nil
}

// Source returns source i of a mixture: its dataset and its own order.
func (d *Data) Source(i int) (*layout.Dataset, shuffle.Options) {
	sub := d.p.mix.srcs[i]
	return sub.ds, sub.opt.Order
}

// WriteNames writes the source name of every record of the dataset opened, in id order (its
// names file), to w.
func (d *Data) WriteNames(w io.Writer) error {
	ds := d.p.ds
	id, ok := ds.Names()
	if !ok {
		return fmt.Errorf("%s has no record names (only datasets packed with %s files have them)", ds.Dir, optname.Flag("format"))
	}
	buf := make([]byte, 1<<20)
	src := stack.Open(ds) // a directory or an object store
	for off := int64(0); off < ds.Size(id); off += int64(len(buf)) {
		n := min(int64(len(buf)), ds.Size(id)-off)
		if err := src.Fill(context.Background(), id, off, [][]byte{buf[:n]}, source.Read{}); err != nil {
			return err
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
	}
	return nil
}

// StoredIDs returns the record ids of ds (a dataset on local disk) by storage index, read
// from its block files: what blockfs order --stats measures an order by.
func StoredIDs(ds *layout.Dataset) ([]uint64, error) {
	ids := make([]uint64, 0, ds.Records())
	src := local.New(ds, false)
	for b := 0; b < ds.Blocks(); b++ {
		v, err := ds.BlockIDs(context.Background(), src, b)
		if err != nil {
			return nil, err
		}
		ids = append(ids, v...)
	}
	return ids, nil
}

// ResolveIDs turns ids from storage indices of ds's records into their source ids, and sets
// blocks[i] to the block of record i, reading each block's ids once: StoredIDs for a sample of
// the records, in memory bounded by the sample and one block.
func ResolveIDs(ds *layout.Dataset, ids []uint64, blocks []uint32) error {
	idx := make([]int, len(ids))
	for i, st := range ids {
		b, _ := ds.BlockOf(st)
		idx[i], blocks[i] = i, uint32(b)
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(blocks[a], blocks[b]) })
	src := local.New(ds, false)
	for i := 0; i < len(idx); {
		b := int(blocks[idx[i]])
		v, err := ds.BlockIDs(context.Background(), src, b)
		if err != nil {
			return err
		}
		first := ds.FirstRecord(b)
		for ; i < len(idx) && int(blocks[idx[i]]) == b; i++ {
			ids[idx[i]] = v[ids[idx[i]]-first]
		}
	}
	return nil
}
