// Package dstest builds small datasets for tests and computes, naively and in memory, what an
// epoch of them must contain, straight from the algorithm in docs/SHUFFLE.md.
package dstest

import (
	"context"
	"encoding/binary"
	"math/rand"
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/local"
)

// Dataset is a packed dataset and everything about it, held in memory.
type Dataset struct {
	Dir    string
	Kind   layout.Kind
	Source [][]byte // records by source id
	Stored []uint64 // source id of each record in storage order
	Counts []uint64 // records per block
}

// Record returns the content of source record id: recognisable bytes of the given length.
func Record(id uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewSource(int64(id) + 1))
	r.Read(b)
	if n >= 8 {
		binary.LittleEndian.PutUint64(b, id)
	}
	return b
}

// Fixed packs n records of rs bytes in blocks of bs bytes. With preshuffle the storage order
// is a random permutation of the source order and ids are stored.
func Fixed(t testing.TB, dir string, n, rs, bs int64, preshuffle bool) *Dataset {
	lengths := make([]int, n)
	for i := range lengths {
		lengths[i] = int(rs)
	}
	return build(t, dir, layout.WriterOptions{Kind: layout.Fixed, RecordSize: rs, BlockSize: bs, IDs: preshuffle}, lengths)
}

// Variable packs records of the given lengths in blocks of bs bytes.
func Variable(t testing.TB, dir string, lengths []int, bs int64, preshuffle bool) *Dataset {
	return build(t, dir, layout.WriterOptions{Kind: layout.Variable, BlockSize: bs, IDs: preshuffle}, lengths)
}

func build(t testing.TB, dir string, opt layout.WriterOptions, lengths []int) *Dataset {
	t.Helper()
	d := &Dataset{Dir: dir, Kind: opt.Kind}
	for i, n := range lengths {
		d.Source = append(d.Source, Record(uint64(i), n))
	}
	d.Stored = make([]uint64, len(lengths))
	for i := range d.Stored {
		d.Stored[i] = uint64(i)
	}
	if opt.IDs {
		opt.PreShuffle = layout.PreShuffle{Shuffled: true, Seed: 7}
		rand.New(rand.NewSource(7)).Shuffle(len(d.Stored), func(i, j int) { d.Stored[i], d.Stored[j] = d.Stored[j], d.Stored[i] })
	}
	w, err := layout.Create(dir, opt, false)
	require.NoError(t, err)
	for _, id := range d.Stored {
		require.NoError(t, w.Append(id, d.Source[id]))
	}
	m, err := w.Commit()
	require.NoError(t, err)
	for _, b := range m.Blocks {
		d.Counts = append(d.Counts, b.Records)
	}
	return d
}

// Order returns the storage index of each record of the epoch, built with whole tables from
// the primitives of docs/SHUFFLE.md (not through shuffle.Order).
func (d *Dataset) Order(opt shuffle.Options) []uint64 {
	nb := len(d.Counts)
	starts := make([]uint64, nb+1)
	for i, c := range d.Counts {
		starts[i+1] = starts[i] + c
	}
	blocks := make([]uint32, nb)
	for i := range blocks {
		blocks[i] = uint32(i)
	}
	if opt.Mode != shuffle.None {
		blocks = shuffle.Permutation(nb, shuffle.NewRNG(shuffle.Derive(opt.Seed, shuffle.DomainBlockOrder, opt.Epoch, 0)))
	}
	k := 1
	if opt.Mode == shuffle.Full && opt.Mix > 1 {
		k = opt.Mix
	}
	var out []uint64
	for w := 0; w*k < nb; w++ {
		var recs []uint64
		for _, b := range blocks[w*k : min((w+1)*k, nb)] {
			for i := starts[b]; i < starts[b+1]; i++ {
				recs = append(recs, i)
			}
		}
		if opt.Mode == shuffle.Full {
			perm := shuffle.Permutation(len(recs), shuffle.NewRNG(shuffle.Derive(opt.Seed, shuffle.DomainWindow, opt.Epoch, uint64(w))))
			shuffled := make([]uint64, len(recs))
			for i, j := range perm {
				shuffled[i] = recs[j]
			}
			recs = shuffled
		}
		out = append(out, recs...)
	}
	return out
}

// Epoch returns the expected bytes, ids and offsets (relative, with the end) of positions
// [start, end) of the epoch.
func (d *Dataset) Epoch(opt shuffle.Options, start, end uint64) (data []byte, ids []byte, offsets []byte) {
	order := d.Order(opt)[start:end]
	offsets = binary.LittleEndian.AppendUint64(nil, 0)
	for _, s := range order {
		id := d.Stored[s]
		data = append(data, d.Source[id]...)
		ids = binary.LittleEndian.AppendUint64(ids, id)
		offsets = binary.LittleEndian.AppendUint64(offsets, uint64(len(data)))
	}
	return data, ids, offsets
}

// Shard returns the position range of slice r of w of an epoch of n records.
func Shard(n, r, w uint64) (uint64, uint64) {
	per := n / w
	return r * per, (r + 1) * per
}

// FromDir describes a dataset packed by other means (such as blockfs pack) from its manifest
// and ids files; source holds the records by source id.
func FromDir(t testing.TB, dir string, source [][]byte) *Dataset {
	t.Helper()
	ds, err := local.Open(dir)
	require.NoError(t, err)
	d := &Dataset{Dir: dir, Kind: ds.Kind(), Source: source, Counts: ds.BlockCounts()}
	for b := 0; b < ds.Blocks(); b++ {
		ids, err := ds.BlockIDs(context.Background(), local.New(ds, false), b)
		require.NoError(t, err)
		d.Stored = append(d.Stored, ids...)
	}
	return d
}

// CachedPages reports, for each page of [off, off+n) of the file at path, whether it is in the
// kernel's page cache: mincore over a read-only mapping, which faults nothing in and issues no
// read (on a blockfs mount it opens one more handle, which reads nothing). off must be a
// multiple of the page size.
func CachedPages(t testing.TB, path string, off, n int64) []bool {
	t.Helper()
	if n == 0 {
		return nil
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(mem)
	page := int64(os.Getpagesize())
	vec := make([]byte, (n+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore %s", path)
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}
