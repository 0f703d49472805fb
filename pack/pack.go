// Package pack turns input data (raw records, .npy, lines, a folder of files) into a blockfs
// dataset through layout.Writer, optionally pre-shuffling records across blocks with bounded
// memory.
package pack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/dustin/go-humanize"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
)

// Options configure a pack.
type Options struct {
	Format     Format // input format; default Auto
	RecordSize int64  // bytes per record (raw; optional check for npy)
	BlockSize  int64  // target block size; default AutoBlockSize of the input's size
	Seed       uint64 // pre-shuffle seed; default 0
	NoShuffle  bool   // keep input order: record i goes to block i / records-per-block
	Force      bool   // replace an existing destination
	// Progress, if set, is called now and then with the work done and the work in all
	// (input bytes; a pre-shuffle counts them twice, once per pass) and the records read.
	Progress func(done, total int64, records uint64)
	// ScatterMemory bounds the pre-shuffle's buffers; default 256 MiB.
	ScatterMemory int64
	// BucketBytes is the pre-shuffle's target bucket size (what pass 2 holds in memory);
	// default 64 MiB.
	BucketBytes int64
	// BlockDone, if set, is called as each block's files are complete in the writer's
	// temporary directory (layout.WriterOptions.BlockDone): an upload streams them from there.
	BlockDone func(dir string, files []string) error
	// FieldBlockDone is BlockDone for a dataset with fields (PackFields): field's block's
	// files, stored under layout.FieldDir(field)+"/".
	FieldBlockDone func(field, dir string, files []string) error

	// Include and Exclude choose the files of a folder (Files): a file is packed when no
	// Exclude pattern matches it and, if Include is not empty, an Include pattern does; a
	// folder an Exclude pattern matches is skipped whole. A pattern without '/' matches names,
	// one with '/' the path relative to the folder, as in .gitignore (see pattern).
	Include, Exclude []string
	// AllFiles packs hidden files and folders and the usual junk too (infiles.IsJunk, infiles.JunkNames),
	// which a folder pack otherwise skips. Include and Exclude still apply.
	AllFiles bool
	// SkipHeader leaves out the first line of a lines input (a CSV's header).
	SkipHeader bool
	// Fields are the options of an input with fields packed in parts (PackPart); PackFields
	// takes them from its reader.
	Fields FieldOptions
	// Compress, when set, compresses the blocks' data files (ParseCompress; each field's on
	// its own), unless a trial of the first block does not shrink it (a note says so).
	Compress *layout.Compression
}

// Validate checks the options that do not depend on the input: the --include and --exclude
// patterns.
func (o Options) Validate() error {
	_, err := newSelection(o)
	return err
}

// Result says what a pack did.
type Result struct {
	Manifest  *layout.Manifest
	Format    Format
	BlockSize int64 // the target block size used
	AutoBlock bool  // whether BlockSize was chosen by AutoBlockSize
	// BlockReason says why AutoBlockSize chose BlockSize ("" when it was given).
	BlockReason string
	// Skipped counts what a folder pack left out.
	Skipped Skipped
	// Notes are things the user should know about the input, one line each (a CSV whose
	// first line looks like a header, packed as a record).
	Notes []string
}

// MinBlocks and MinAutoBlockSize shape AutoBlockSize: a dataset is cut into at least
// MinBlocks blocks, so that consecutive epochs visit blocks in clearly different orders, but no
// block is smaller than MinAutoBlockSize, below which blocks stop making disk reads large.
const (
	MinBlocks        = 64
	MinAutoBlockSize = 256 << 10
)

// AutoBlockSize returns the block size pack uses for input of the given size when none is
// given: layout.DefaultBlockSize, or less for inputs under 64 blocks of it, so that the
// dataset has at least MinBlocks blocks; never below MinAutoBlockSize nor below one record.
// With only 3 blocks (Fashion-MNIST's 47 MB in 16 MiB blocks), consecutive epochs are nearly
// the same order: their position correlation is 0.886, against 0.048 with 1 MiB blocks.
func AutoBlockSize(inputBytes, recordSize int64) int64 {
	bs := int64(layout.DefaultBlockSize)
	if inputBytes/MinBlocks < bs {
		bs = max(inputBytes/MinBlocks/4096*4096, MinAutoBlockSize)
	}
	return max(bs, recordSize)
}

// autoBlockReason says why AutoBlockSize(inputBytes, recordSize) chose what it did, for pack's
// summary.
func autoBlockReason(inputBytes, recordSize int64) string {
	bs := AutoBlockSize(inputBytes, recordSize)
	switch {
	case bs == recordSize && recordSize > MinAutoBlockSize:
		return "one record each: a block holds at least one record"
	case bs == layout.DefaultBlockSize:
		return "the default"
	case inputBytes/MinBlocks < MinAutoBlockSize:
		return fmt.Sprintf("the data is small, and blocks are at least %s", humanize.IBytes(MinAutoBlockSize))
	default:
		return fmt.Sprintf("chosen for at least %d blocks", MinBlocks)
	}
}

// Pack packs src into a dataset at dst. Cancelling ctx (SIGINT) stops it and removes
// everything it wrote; dst is only ever replaced whole, at the end.
func Pack(ctx context.Context, src, dst string, opt Options) (*Result, error) {
	sel, err := newSelection(opt)
	if err != nil {
		return nil, err
	}
	format := opt.Format
	if format == "" || format == Auto {
		var err error
		if format, err = Detect(src); err != nil {
			if opt.RecordSize == 0 || !errors.As(err, new(unknownFormatError)) {
				return nil, err
			}
			format = Raw // a record size only makes sense for raw records
		}
	}
	if err := optionsApply(opt, format, src); err != nil {
		return nil, err
	}
	res := &Result{Format: format, BlockSize: opt.BlockSize}
	in, el, err := openInput(src, format, opt, sel, res)
	if err != nil {
		return nil, err
	}
	defer in.close()
	return packInput(ctx, in, el, dst, filepath.Base(src), opt, res)
}

// packInput packs the opened input in, of element el, into a dataset at dst (Pack and
// PackPart); source is the manifest's source, res has the input's format.
func packInput(ctx context.Context, in input, el element, dst, source string, opt Options, res *Result) (*Result, error) {
	format := res.Format
	if opt.BlockSize == 0 {
		opt.BlockSize = AutoBlockSize(in.size(), el.recordSize)
		res.BlockSize, res.AutoBlock = opt.BlockSize, true
		res.BlockReason = autoBlockReason(in.size(), el.recordSize)
	}
	if opt.RecordSize != 0 && el.kind == layout.Variable {
		return nil, fmt.Errorf("%s does not apply to %s input (its records vary in length)", optname.Flag("record-size"), format)
	}
	w, err := layout.Create(dst, layout.WriterOptions{
		Kind: el.kind, RecordSize: el.recordSize, BlockSize: opt.BlockSize,
		DType: el.dtype, Shape: el.shape,
		IDs:        !opt.NoShuffle,
		PreShuffle: layout.PreShuffle{Shuffled: !opt.NoShuffle, Seed: opt.Seed},
		Source:     source,
		Names:      format == Files,
		BlockDone:  opt.BlockDone,
		Compress:   opt.Compress,
	}, opt.Force)
	if err != nil {
		return nil, err
	}
	p := &packer{ctx: ctx, w: w, opt: opt, in: in}
	if opt.NoShuffle {
		err = p.inOrder()
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
	if res.Manifest, err = w.Commit(); err != nil {
		return nil, err
	}
	if note := compressNote(w, ""); note != "" {
		res.Notes = append(res.Notes, note)
	}
	return res, nil
}

// openInput opens src as format's input and returns it and its element; it notes in res
// what the user should know of it (a lines input's header) and what a folder pack skipped.
func openInput(src string, format Format, opt Options, sel *selection, res *Result) (input, element, error) {
	switch format {
	case Raw:
		return openRaw(src, opt.RecordSize, false)
	case Npy:
		return openNpy(src, opt.RecordSize, false)
	case Lines:
		in, el, err := openLines(src, opt.SkipHeader, false)
		if err == nil && !opt.SkipHeader {
			if note := headerNote(src); note != "" {
				res.Notes = append(res.Notes, note)
			}
		}
		return in, el, err
	case Files:
		in, el, err := openFiles(src, sel)
		res.Skipped = sel.skipped
		return in, el, err
	}
	return nil, element{}, fmt.Errorf("unknown format %q", format)
}

// optionsApply refuses options that do not apply to the input's format.
func optionsApply(opt Options, format Format, src string) error {
	if format != Files && (len(opt.Include) > 0 || len(opt.Exclude) > 0 || opt.AllFiles) {
		return fmt.Errorf("%s, %s and %s choose the files of a folder; %s is %s input", optname.Flag("include"), optname.Flag("exclude"), optname.Flag("all-files"), src, format)
	}
	if format != Lines && opt.SkipHeader {
		return fmt.Errorf("%s is for lines input (CSV, TSV, JSON Lines, text); %s is %s input", optname.Flag("skip-header"), src, format)
	}
	return nil
}

type packer struct {
	ctx     context.Context
	w       *layout.Writer
	opt     Options
	in      input
	done    int64  // progress: input bytes handled
	records uint64 // progress: records read
}

// progress reports n more bytes done out of total, checking for cancellation now and then.
func (p *packer) progress(n, total int64) error {
	before := p.done
	p.done += n
	if p.done>>22 != before>>22 || n == 0 { // every 4 MiB
		if p.opt.Progress != nil {
			p.opt.Progress(p.done, total, p.records)
		}
		return p.ctx.Err()
	}
	return nil
}

// inOrder appends the records as they come. Fixed-size records that fit in the read buffer are
// read straight into the writer's block buffer, a block at a time.
func (p *packer) inOrder() error {
	total := p.in.size()
	if fx, ok := p.in.(*fixedInput); ok && fx.r != nil {
		if err := p.readFixed(fx, 0, total); err != nil {
			return err
		}
		return p.progress(0, total)
	}
	if m, ok := p.in.(*multiInput); ok && m.el.kind == layout.Fixed && m.el.recordSize <= readBuffer {
		return p.multiFixed(m, total)
	}
	for id := uint64(0); ; id++ {
		rec, err := p.in.next()
		if errors.Is(err, io.EOF) {
			return p.progress(0, total)
		}
		if err != nil {
			return err
		}
		if err := p.take(id, rec); err != nil {
			return err
		}
		if err := p.write(id, rec); err != nil {
			return err
		}
		if err := p.progress(rec.size(), total); err != nil {
			return err
		}
	}
}

// readFixed appends fx's records, whose source ids start at first, straight into the
// writer's block buffer, a read buffer at a time.
func (p *packer) readFixed(fx *fixedInput, first uint64, total int64) error {
	rs := uint64(fx.rs)
	per := max(1, uint64(readBuffer)/rs)
	for fx.left > 0 {
		k := min(per, uint64(fx.left))
		if err := p.w.ReadFixed(fx.sec, first, k); err != nil {
			if re := (*layout.ReadError)(nil); errors.As(err, &re) {
				return fmt.Errorf("reading %s: %w", fx.f.Name(), re.Err)
			}
			return err // writing a block, or uploading it
		}
		first += k
		fx.left -= int64(k)
		p.records += k
		if err := p.progress(int64(k*rs), total); err != nil {
			return err
		}
	}
	return nil
}

// take accepts the record with source id id, just read: it refuses one larger than the
// writer takes, before any of it is copied, and counts it and its name.
func (p *packer) take(id uint64, rec record) error {
	if n, limit := rec.size(), p.w.MaxRecord(); n > limit {
		return fmt.Errorf("%s is %s (%d bytes); a record may be at most %s (%d bytes)",
			p.in.describe(id), humanize.IBytes(uint64(n)), n, humanize.IBytes(uint64(limit)), limit)
	}
	p.records++
	return p.addName()
}

// write hands a record to the writer: its bytes, or its section to copy from.
func (p *packer) write(id uint64, rec record) error {
	if rec.sec != nil {
		return p.w.AppendFrom(id, rec.sec, rec.sec.Size())
	}
	return p.w.Append(id, rec.b)
}

func (p *packer) addName() error {
	if n := p.in.name(); n != "" {
		return p.w.AddName(n)
	}
	return nil
}
