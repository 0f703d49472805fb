// Package pack turns input data into a blockfs dataset through layout.Writer.
package pack

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// Options configure a pack.
type Options struct {
	RecordSize int64  // bytes per record (raw input); required
	BlockSize  int64  // target block size; default layout.DefaultBlockSize
	Seed       uint64 // pre-shuffle seed; default 0
	NoShuffle  bool   // keep input order: record i goes to block i / records-per-block
	Force      bool   // replace an existing destination
	// Progress, if set, is called now and then with the input bytes consumed so far.
	Progress func(done int64)
	// ScatterMemory bounds the buffers of the pre-shuffle's first pass; default 256 MiB.
	ScatterMemory int64
}

// Raw packs src, a flat file of fixed-size records, into a dataset at dst. Cancelling ctx
// (SIGINT) stops it and removes everything it wrote; dst is only ever replaced whole.
func Raw(ctx context.Context, src, dst string, opt Options) (*layout.Manifest, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("cannot read the input: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", src)
	}
	if opt.RecordSize <= 0 {
		return nil, errors.New("--record-size must be positive")
	}
	size := st.Size()
	if size == 0 {
		return nil, fmt.Errorf("%s is empty: nothing to pack", src)
	}
	if size%opt.RecordSize != 0 {
		return nil, fmt.Errorf("%s is %d bytes, not a multiple of the record size %d (%d bytes left over); check --record-size", src, size, opt.RecordSize, size%opt.RecordSize)
	}
	w, err := layout.Create(dst, layout.WriterOptions{
		Kind: layout.Fixed, RecordSize: opt.RecordSize, BlockSize: opt.BlockSize,
		IDs:        !opt.NoShuffle,
		PreShuffle: layout.PreShuffle{Shuffled: !opt.NoShuffle, Seed: opt.Seed},
		Source:     filepath.Base(src),
	}, opt.Force)
	if err != nil {
		return nil, err
	}
	p := &packer{ctx: ctx, w: w, opt: opt, in: f, n: uint64(size / opt.RecordSize)}
	if opt.NoShuffle {
		err = p.sequential()
	} else {
		err = p.shuffled()
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		w.Abort()
		if ctx.Err() != nil {
			return nil, errors.New("interrupted: nothing was written")
		}
		return nil, err
	}
	return w.Commit()
}

type packer struct {
	ctx context.Context
	w   *layout.Writer
	opt Options
	in  io.ReaderAt
	n   uint64 // records
}

func (p *packer) progress(records uint64) {
	if p.opt.Progress != nil {
		p.opt.Progress(int64(records) * p.opt.RecordSize)
	}
}

// sequential writes the input in order, one block per read.
func (p *packer) sequential() error {
	rs := uint64(p.opt.RecordSize)
	per := p.w.RecordsPerBlock()
	buf := make([]byte, per*rs)
	ids := make([]uint64, per)
	for first := uint64(0); first < p.n; first += per {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		k := min(per, p.n-first)
		if _, err := p.in.ReadAt(buf[:k*rs], int64(first*rs)); err != nil {
			return fmt.Errorf("reading the input: %w", err)
		}
		for i := range ids[:k] {
			ids[i] = first + uint64(i)
		}
		if err := p.w.WriteBlock(buf[:k*rs], ids[:k]); err != nil {
			return err
		}
		p.progress(first + k)
	}
	return nil
}

// shuffled assigns records to blocks uniformly at random with bounded memory. Pass 1 reads the
// input once and appends each record, prefixed by its id, to the scatter file of a block
// drawn with probability proportional to the block's free capacity (a Fenwick tree over the
// capacities), which makes the assignment uniform among all that fill each block exactly.
// Pass 2 loads one scatter file at a time (one block), permutes its records and writes it.
func (p *packer) shuffled() error {
	rs := uint64(p.opt.RecordSize)
	per := p.w.RecordsPerBlock()
	nb := int((p.n + per - 1) / per)
	caps := make([]uint64, nb)
	for b := range caps {
		caps[b] = min(per, p.n-uint64(b)*per)
	}
	tree := newFenwick(caps)
	dir := filepath.Join(p.w.TempDir(), "scatter")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	name := func(b int) string { return filepath.Join(dir, fmt.Sprintf("%06d", b)) }

	mem := p.opt.ScatterMemory
	if mem <= 0 {
		mem = 256 << 20
	}
	limit := max(int(mem)/nb, int(rs+8))
	bufs := make([][]byte, nb)
	flush := func(b int) error {
		if len(bufs[b]) == 0 {
			return nil
		}
		f, err := os.OpenFile(name(b), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		_, err = f.Write(bufs[b])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		bufs[b] = bufs[b][:0]
		return err
	}
	rng := shuffle.NewRNG(shuffle.Derive(p.opt.Seed, shuffle.DomainPackAssign, 0, 0))
	in := bufio.NewReaderSize(io.NewSectionReader(p.in, 0, int64(p.n*rs)), 4<<20)
	rec := make([]byte, rs)
	left := p.n
	for id := uint64(0); id < p.n; id++ {
		if _, err := io.ReadFull(in, rec); err != nil {
			return fmt.Errorf("reading the input: %w", err)
		}
		b := tree.take(rng.Below(left))
		left--
		bufs[b] = binary.LittleEndian.AppendUint64(bufs[b], id)
		bufs[b] = append(bufs[b], rec...)
		if len(bufs[b]) >= limit {
			if err := flush(b); err != nil {
				return err
			}
		}
		if id%65536 == 0 {
			if err := p.ctx.Err(); err != nil {
				return err
			}
			p.progress(id / 2)
		}
	}
	for b := range bufs {
		if err := flush(b); err != nil {
			return err
		}
		bufs[b] = nil
	}
	data := make([]byte, per*rs)
	ids := make([]uint64, per)
	for b := 0; b < nb; b++ {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		raw, err := os.ReadFile(name(b))
		if err != nil {
			return err
		}
		k := uint64(len(raw)) / (rs + 8)
		if k != caps[b] || uint64(len(raw)) != k*(rs+8) {
			return fmt.Errorf("scatter file of block %d holds %d bytes, want %d records", b, len(raw), caps[b])
		}
		for i := uint64(0); i < k; i++ {
			ids[i] = binary.LittleEndian.Uint64(raw[i*(rs+8):])
			copy(data[i*rs:(i+1)*rs], raw[i*(rs+8)+8:(i+1)*(rs+8)])
		}
		shuffle.ShuffleInPlace(int(k), shuffle.NewRNG(shuffle.Derive(p.opt.Seed, shuffle.DomainPackInBlock, 0, uint64(b))), func(i, j int) {
			ids[i], ids[j] = ids[j], ids[i]
			a, c := data[uint64(i)*rs:uint64(i+1)*rs], data[uint64(j)*rs:uint64(j+1)*rs]
			for x := range a {
				a[x], c[x] = c[x], a[x]
			}
		})
		if err := p.w.WriteBlock(data[:k*rs], ids[:k]); err != nil {
			return err
		}
		if err := os.Remove(name(b)); err != nil {
			return err
		}
		p.progress(p.n/2 + (uint64(b+1)*p.n)/uint64(2*nb))
	}
	return nil
}

// fenwick is a binary indexed tree over remaining block capacities.
type fenwick struct{ t []uint64 }

func newFenwick(caps []uint64) *fenwick {
	f := &fenwick{t: make([]uint64, len(caps)+1)}
	for i, c := range caps {
		for j := i + 1; j < len(f.t); j += j & -j {
			f.t[j] += c
		}
	}
	return f
}

// take returns the block holding the r-th unit of remaining capacity (r < total) and removes
// that unit.
func (f *fenwick) take(r uint64) int {
	pos := 0
	step := 1
	for step*2 < len(f.t) {
		step *= 2
	}
	for ; step > 0; step /= 2 {
		if next := pos + step; next < len(f.t) && f.t[next] <= r {
			pos = next
			r -= f.t[next]
		}
	}
	for j := pos + 1; j < len(f.t); j += j & -j {
		f.t[j]--
	}
	return pos
}
