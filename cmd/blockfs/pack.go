package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/blockfs/blockfs/internal/infiles"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/pack"
)

type packFlags struct {
	format      string
	recordSize  string
	blockSize   string
	seed        uint64
	noShuffle   bool
	force       bool
	quiet       bool
	include     []string
	exclude     []string
	allFiles    bool
	skipHeader  bool
	columns     []string // parquet, arrow: the columns to pack
	fillMissing bool     // webdataset: empty values for a sample's missing fields
	segmentsBy  string   // a table's entity column: rows of the others, segments by it
	clean       bool     // pack --clean DST: remove what interrupted packs of DST left
	s3          s3Flags  // DST s3://BUCKET/PREFIX
	part        string   // pack --part I/N INPUT... OUT: one part of a pack in parts
	merge       bool     // pack --merge OUT: the dataset of the parts in OUT
	compress    string   // zstd[:LEVEL]: compressed blocks
}

// compression returns --compress as pack takes it (nil: raw blocks).
func (f packFlags) compression() (*layout.Compression, error) {
	c, err := pack.ParseCompress(f.compress)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return c, nil
}

// packLong is pack's --help.
const packLong = `pack turns SRC into a dataset directory DST. Formats:

  raw    a flat file of fixed-size records (--record-size), as numpy's tofile or np.memmap write
  npy    a NumPy .npy file (1.0, 2.0, 3.0): one record per row along the first axis; dtype and
         the per-record shape are kept. C order only.
  lines  one variable-length record per line (JSON Lines, CSV rows, text); the record is the
         line without its '\n' (a '\r' before it is kept). --skip-header leaves out the
         first line (a CSV's header)
  files  a folder tree, one record per regular file, in sorted path order; the relative
         paths are kept (blockfs info --names, .blockfs/names.txt in the mount)
  auto   (default) a folder is files, the .npy magic is npy, .jsonl/.ndjson/.txt/.csv/.tsv
         are lines, .parquet, .arrow/.feather, .tar and .tfrecord are the formats below; any
         other file is raw if --record-size is given, else needs --format

Samples with named fields, packed as a dataset with a file per field in the mount
(epoch-NNNN.<field>, with .offsets for values of varying length), in input order; SRC is a
file, a quoted glob ('shards/*.tar') or a folder of such files:

  parquet     a field per column (--columns to choose): numbers as fixed-size fields with
              their dtype, fixed-size lists as shaped fields, binary, strings and lists as
              variable fields, a struct's leaves as parent.child; nulls are refused
  arrow       Arrow IPC files or streams (.arrow, .feather; the Hugging Face datasets cache), the
              same way
  webdataset  tar shards: a sample per key (0001.jpg, 0001.cls -> fields jpg and cls); a sample
              missing a field is refused, or given an empty value with --fill-missing
  tfrecord    TFRecord files: every length and data CRC checked; one field, so a plain
              dataset of variable records (epoch-NNNN, .offsets), as any input of one field

A folder pack skips hidden files and folders (names starting with '.': .DS_Store, ._* files,
.git/), backups (name~) and the usual junk (Thumbs.db, ehthumbs.db, desktop.ini, __MACOSX/,
$RECYCLE.BIN/, System Volume Information/, lost+found/); --all-files keeps them. Symlinks are
not followed. --include GLOB and --exclude GLOB (repeatable) choose files: a GLOB without '/'
matches a file's or folder's name at any depth, one with '/' its path relative to SRC (a
leading '/' anchors at SRC); ** matches any number of folders, cat/** what is inside cat. A
file is packed when no --exclude matches it and, with --include, some --include does; an
--exclude that matches a folder skips it whole. The summary says what was skipped.
  blockfs pack --include '*.png' images/ data/       only the PNGs (no README.txt)
  blockfs pack --include '*/**' images/ data/        only files inside class folders

By default records are assigned to blocks in a seeded random order (block shuffling is only as
good as this pre-shuffle), with bounded memory whatever the input size; --no-shuffle keeps
input order, so record i lands in block i / records-per-block.

DST is written in a temporary directory next to it (.DST.tmp-*) and renamed at the end: an
interrupted or failed pack leaves nothing behind, and an existing DST is only replaced with
--force, swapped in one rename where the filesystem can. What a pack killed with SIGKILL left
is removed by the next pack of DST, or by blockfs pack --clean DST (never a running pack's).
DST may be s3://BUCKET/PREFIX: each block file is uploaded as soon as it is written and then
deleted locally ($TMPDIR holds a few blocks, and the pre-shuffle's spill), and the manifest
goes last, so the dataset appears whole or not at all. A dataset with fields too: each field's
blocks as they are written, then the fields' manifests, then blockfs-fields.json.

A pack too large for one machine is packed in parts, each anywhere and with no coordination,
then merged: blockfs pack --part I/N [flags] INPUT... OUT packs part I (0 <= I < N) of the
inputs (files, quoted globs, @LISTFILE: a file listing one input a line; a folder for
--format files, whose files are shared) into OUT/parts/part-I-of-N/ and writes
OUT/parts/part-I-of-N.json last; a failed part is run again alone. Part I takes inputs
floor(I*n/N) to floor((I+1)*n/N) of n, and pre-shuffles its records with its own seed, derived
from --seed and I. Once every part is there, blockfs pack --merge OUT writes OUT/blockfs.json
over the parts' blocks, without copying them: an ordinary dataset, whose sample ids number the
inputs' records in order, as one pack would. Merge refuses a missing, duplicated or foreign
part. Raw, npy (of one dtype and shape), lines and files inputs, and inputs with fields
(WebDataset shards, TFRecord files, Parquet and Arrow: each field's blocks under
OUT/fields/NAME/parts/); OUT a directory or s3://BUCKET/PREFIX (the parts uploaded under
PREFIX/parts/).`

func newPack() *cobra.Command {
	var f packFlags
	c := &cobra.Command{
		Use:   "pack [--part I/N | --merge] [--format auto|raw|npy|lines|files|parquet|arrow|webdataset|tfrecord] [--include GLOB] [--exclude GLOB] [--skip-header] [--columns A,B] [--fill-missing] [flags] SRC DST",
		Short: "Pack input records into a block dataset",
		Long:  packLong,
		Args:  func(c *cobra.Command, args []string) error { return packArgs(f)(c, args) },
		RunE:  func(c *cobra.Command, args []string) error { return runPackArgs(f, args) },
	}
	fl := c.Flags()
	fl.StringVar(&f.format, "format", "auto", "input format: auto, raw, npy, lines, files, parquet, arrow, webdataset, tfrecord")
	fl.StringVar(&f.recordSize, "record-size", "", "bytes per record (raw; checks npy rows), e.g. 4096 or 4KiB")
	fl.StringVar(&f.blockSize, "block-size", "", "target block file size (default: "+ibytes(layout.DefaultBlockSize)+", or less so that there are at least 64 blocks, down to "+ibytes(pack.MinAutoBlockSize)+")")
	fl.Uint64Var(&f.seed, "seed", 0, "pre-shuffle seed")
	fl.BoolVar(&f.noShuffle, "no-shuffle", false, "keep input order instead of pre-shuffling")
	fl.BoolVar(&f.force, "force", false, "replace DST if it exists")
	fl.BoolVar(&f.clean, "clean", false, "pack --clean DST: remove the temporary directories that killed packs of DST left beside it, and exit")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress bar")
	fl.StringArrayVar(&f.include, "include", nil, "pack only the files of a folder that match `GLOB` (repeatable; a GLOB without '/' matches names at any depth, one with '/' paths relative to SRC)")
	fl.StringArrayVar(&f.exclude, "exclude", nil, "leave out the files and folders that match `GLOB` (repeatable; matched as --include's)")
	fl.BoolVar(&f.allFiles, "all-files", false, "also pack hidden files and folders and the usual junk (.DS_Store, Thumbs.db, __MACOSX/, ...)")
	fl.BoolVar(&f.skipHeader, "skip-header", false, "leave out the first line of a lines input (a CSV's header)")
	fl.StringSliceVar(&f.columns, "columns", nil, "parquet, arrow: pack only these columns, in this order (comma-separated; a struct's leaves are parent.child)")
	fl.StringVar(&f.segmentsBy, "segments-by", "", "parquet, arrow: a time series table sorted by this column (an entity id): pack rows of the other columns (fixed-size numbers of one dtype; --columns to choose) in order, with each entity's rows as a segment, for mount --window")
	fl.BoolVar(&f.fillMissing, "fill-missing", false, "webdataset: give a sample missing a field an empty value instead of refusing the input")
	fl.StringVar(&f.part, "part", "", "pack --part I/N INPUT... OUT: pack part I of N (0 <= I < N) of the inputs into OUT/parts/ (pack --merge OUT once all are there)")
	fl.BoolVar(&f.merge, "merge", false, "pack --merge OUT: write the dataset of the parts packed in OUT (pack --part), over their blocks")
	fl.StringVar(&f.compress, "compress", "", "compress the blocks: zstd, or zstd:LEVEL (1-22, default 3), in frames of "+ibytes(layout.DefaultFrame)+" a read decompresses alone; a dataset (or field) whose first block does not shrink is kept raw")
	f.s3.register(fl)
	return c
}

func runPack(f packFlags, src, dst string) error {
	format, err := pack.ParseFormat(f.format)
	if err != nil {
		return usagef("--format: %v", err)
	}
	if ff, ok := pack.DetectFields(src); ok && format == pack.Auto {
		format = ff
	}
	format, shards := folderShards(f, format, src)
	if format.HasFields() {
		err := runPackFields(f, format, src, dst)
		if err == nil && shards != "" {
			fmt.Fprintln(os.Stderr, "note: "+shards)
		}
		return err
	}
	opt, err := plainOptions(f, format)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var bar *progressbar.ProgressBar
	if !f.quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		opt.Progress = func(done, total int64, records uint64) {
			if bar == nil {
				bar = progressbar.NewOptions64(total,
					progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription("packing"),
					progressbar.OptionShowBytes(true),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionShowElapsedTimeOnFinish(),
					progressbar.OptionClearOnFinish())
			}
			bar.Describe(fmt.Sprintf("packing %s records", humanize.Comma(int64(records))))
			_ = bar.Set64(done)
		}
	}
	start := time.Now()
	res, err := packTo(ctx, src, dst, opt, &f.s3)
	if bar != nil {
		_ = bar.Clear()
	}
	if err != nil {
		return err
	}
	for _, note := range res.Notes {
		fmt.Fprintln(os.Stderr, "note: "+note)
	}
	fmt.Println(packSummary(res, dst, f.seed, f.noShuffle, time.Since(start).Seconds()))
	if sk := res.Skipped.String(); sk != "" {
		fmt.Println(sk)
	}
	return nil
}

// fieldFlagsFor says which inputs take the options of inputs with fields.
const fieldFlagsFor = "--columns and --segments-by are for tables (--format parquet, arrow), --fill-missing for WebDataset shards (--format webdataset)"

// fieldFlagsRefusal refuses the options of inputs with fields given for an input without
// (format, or auto: one Detect tells), naming them and which inputs take each.
func fieldFlagsRefusal(f packFlags, format pack.Format) error {
	var given []string
	for _, g := range []struct {
		name string
		on   bool
	}{{"--columns", len(f.columns) > 0}, {"--segments-by", f.segmentsBy != ""}, {"--fill-missing", f.fillMissing}} {
		if g.on {
			given = append(given, g.name)
		}
	}
	what, verb := given[0], "does"
	if len(given) > 1 {
		what, verb = strings.Join(given[:len(given)-1], ", ")+" and "+given[len(given)-1], "do"
	}
	input := "--format " + string(format)
	if format == pack.Auto {
		input = "this input (it has no fields)"
	}
	return usagef("%s %s not apply to %s: %s", what, verb, input, fieldFlagsFor)
}

// folderShards returns the format of a folder of WebDataset or TFRecord shards for --format
// auto (infiles.DetectShards), and the note pack prints of it; format and "" for anything else,
// and when an option of a folder of files is given.
func folderShards(f packFlags, format pack.Format, src string) (pack.Format, string) {
	filesOnly := f.recordSize != "" || f.skipHeader || f.noShuffle || len(f.include)+len(f.exclude) > 0 || f.allFiles
	if format != pack.Auto || filesOnly {
		return format, ""
	}
	ff, n, ok := infiles.DetectShards(src)
	if !ok {
		return format, ""
	}
	return pack.Format(ff), fmt.Sprintf("%s is a folder of %d %s shards: packed their samples with fields (--format files packs each file as one record instead)", src, n, ff)
}

// plainOptions checks pack's flags for an input of format (raw, npy, lines, files) and
// converts them to pack's options.
func plainOptions(f packFlags, format pack.Format) (pack.Options, error) {
	if len(f.columns) > 0 || f.fillMissing || f.segmentsBy != "" {
		return pack.Options{}, fieldFlagsRefusal(f, format)
	}
	var rs int64
	var err error
	if f.recordSize != "" {
		if rs, err = parseSize("record-size", f.recordSize); err != nil {
			return pack.Options{}, err
		}
		if rs == 0 {
			return pack.Options{}, usagef("--record-size must be at least 1 byte")
		}
	}
	if format == pack.Raw && rs == 0 {
		return pack.Options{}, usagef("--record-size is required for --format raw (the size of one record in bytes)")
	}
	var bs int64 // 0: pack chooses
	if f.blockSize != "" {
		if bs, err = parseSize("block-size", f.blockSize); err != nil {
			return pack.Options{}, err
		}
		if bs == 0 {
			return pack.Options{}, usagef("--block-size must be at least 1 byte")
		}
	}
	if bs > 0 && rs > bs {
		return pack.Options{}, usagef("--record-size %s is larger than --block-size %s; raise --block-size", ibytes(uint64(rs)), ibytes(uint64(bs)))
	}
	comp, err := f.compression()
	if err != nil {
		return pack.Options{}, err
	}
	opt := pack.Options{Format: format, RecordSize: rs, BlockSize: bs, Seed: f.seed, NoShuffle: f.noShuffle, Force: f.force,
		Include: f.include, Exclude: f.exclude, AllFiles: f.allFiles, SkipHeader: f.skipHeader, Compress: comp}
	if err := opt.Validate(); err != nil {
		return pack.Options{}, usagef("%v", err)
	}
	return opt, nil
}

// runPackArgs runs pack SRC DST, pack --clean DST, pack --part I/N INPUT... OUT or pack
// --merge OUT.
func runPackArgs(f packFlags, args []string) error {
	switch {
	case f.clean:
		return runPackClean(args[0])
	case f.merge:
		return runPackMerge(f, args[0])
	case f.part != "":
		return runPackPart(f, args[:len(args)-1], args[len(args)-1])
	}
	return runPack(f, args[0], args[1])
}

// packArgs checks pack's arguments: SRC DST, DST alone with --clean, INPUT... OUT with
// --part, OUT alone with --merge.
func packArgs(f packFlags) cobra.PositionalArgs {
	switch {
	case f.merge && (f.part != "" || f.clean):
		return func(*cobra.Command, []string) error { return usagef("--merge does not go with --part or --clean") }
	case f.clean || f.merge:
		return exactArgs("DST")
	case f.part != "":
		return func(c *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("pack --part I/N takes INPUT... OUT (files, quoted globs or @LISTFILE, then the output), got %d arguments", len(args))
			}
			return nil
		}
	}
	return exactArgs("SRC", "DST")
}

// runPackClean removes what killed packs of dst left (layout.RemoveStale) and says what.
func runPackClean(dst string) error {
	removed, err := layout.RemoveStale(dst)
	for _, p := range removed {
		fmt.Println("removed " + p)
	}
	if err == nil && len(removed) == 0 {
		fmt.Println("nothing to remove: no interrupted pack of " + dst + " left anything")
	}
	return err
}

// recordNouns names a format's records in pack's summary.
var recordNouns = map[pack.Format]string{pack.Raw: "records", pack.Npy: ".npy rows", pack.Lines: "lines", pack.Files: "files"}

// packSummary is the first line of pack's summary: "packed 3000 files (1.2 MiB) into 5 blocks
// of 256 KiB (the data is small: ...; --block-size to set) at DST, pre-shuffled with seed 0,
// in 0.1s (12 MB/s)".
func packSummary(res *pack.Result, dst string, seed uint64, noShuffle bool, secs float64) string {
	m := res.Manifest
	order := fmt.Sprintf("pre-shuffled with seed %d", seed)
	if noShuffle {
		order = "in input order"
	}
	size := ibytes(m.Bytes)
	if m.Kind == layout.Fixed {
		size = ibytes(uint64(m.RecordSize)) + " each, " + size
	}
	noun := recordNouns[res.Format]
	if m.Records == 1 {
		noun = strings.TrimSuffix(noun, "s")
	}
	blocks := fmt.Sprintf("%d %s of %s", len(m.Blocks), plural(len(m.Blocks), "block", "blocks"), ibytes(uint64(res.BlockSize)))
	if res.AutoBlock {
		blocks += fmt.Sprintf(" (%s; --block-size to set)", res.BlockReason)
	}
	return fmt.Sprintf("packed %d %s (%s) into %s at %s, %s%s, in %.1fs (%s)",
		m.Records, noun, size, blocks, dst, order, compressedText(m), secs, rate(m.Bytes, secs))
}

// compressedText says what a dataset's blocks take compressed: ", compressed with zstd
// level 3 to 1.2 MiB (29%)"; "" for raw blocks.
func compressedText(m *layout.Manifest) string {
	if m == nil || m.Compression == nil {
		return ""
	}
	stored, raw := layout.StoredBytes(m)
	return fmt.Sprintf(", compressed with %s level %d to %s (%.0f%%)", m.Compression.Codec, m.Compression.Level,
		ibytes(stored), 100*float64(stored)/float64(max(raw, 1)))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// runPackFields packs an input with fields (pack.PackFields).
func runPackFields(f packFlags, format pack.Format, src, dst string) error {
	if f.recordSize != "" || f.skipHeader || f.noShuffle || len(f.include) > 0 || len(f.exclude) > 0 || f.allFiles {
		return usagef("--record-size, --skip-header, --no-shuffle, --include, --exclude and --all-files do not apply to --format %s (its samples keep their input order; the mount shuffles them)", format)
	}
	if f.segmentsBy != "" && format != pack.Parquet && format != pack.Arrow {
		return usagef("--segments-by does not apply to --format %s: %s", format, fieldFlagsFor)
	}
	var bs int64
	var err error
	if f.blockSize != "" {
		if bs, err = parseSize("block-size", f.blockSize); err != nil {
			return err
		}
	}
	paths, err := pack.FieldInputs(format, src)
	if err != nil {
		return err
	}
	r, err := pack.OpenSamples(format, paths, pack.FieldOptions{Columns: f.columns, FillMissing: f.fillMissing})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	comp, err := f.compression()
	if err != nil {
		return err
	}
	opt := pack.Options{BlockSize: bs, Force: f.force, Compress: comp}
	var clearBar func()
	if !f.quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		opt.Progress, clearBar = samplesBar()
	}
	start := time.Now()
	// write packs into dir; to an object store, dir is local and up streams it there.
	var sres *pack.SegmentsResult
	var res *pack.FieldsResult
	write := func(dir string, o pack.Options) error {
		var err error
		if f.segmentsBy != "" {
			sres, err = pack.PackSegmented(ctx, r, dir, f.segmentsBy, o)
		} else {
			res, err = pack.PackFields(ctx, r, dir, format, len(paths), o)
		}
		return err
	}
	if mount.IsRemote(dst) {
		so, derr := f.s3.decode()
		if derr != nil {
			return derr
		}
		err = usageIfStore(pack.ToStore(ctx, dst, so.S3, f.force, f.segmentsBy == "" && len(r.Fields()) > 1, opt, write))
	} else {
		err = write(dst, opt)
	}
	if clearBar != nil {
		clearBar()
	}
	if err != nil {
		r.Close()
		return err
	}
	secs := time.Since(start).Seconds()
	if f.segmentsBy != "" {
		fmt.Println(segmentsSummary(sres, f.segmentsBy, dst, secs))
		return nil
	}
	for _, note := range res.Notes {
		fmt.Fprintln(os.Stderr, "note: "+note)
	}
	fmt.Println(fieldsSummary(res, dst, secs))
	return nil
}

// samplesBar returns a pack's Progress for an input with fields, which draws a progress bar on
// stderr once the input's size is known, and the function that clears it.
func samplesBar() (progress func(done, total int64, records uint64), clearBar func()) {
	var bar *progressbar.ProgressBar
	progress = func(done, total int64, records uint64) {
		if bar == nil && total > 0 {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowBytes(true),
				progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("packing %s samples", humanize.Comma(int64(records))))
			_ = bar.Set64(done)
		}
	}
	clearBar = func() {
		if bar != nil {
			_ = bar.Clear()
		}
	}
	return progress, clearBar
}

// segmentsSummary is pack --segments-by's summary: "packed 1000 rows of a, b (<f4 [2], 8 B
// each) with 10 segments by id into 1 blocks at DST, in input order, in 0.1s (...); mount it
// with --window L: windows never cross a segment".
func segmentsSummary(sres *pack.SegmentsResult, by, dst string, secs float64) string {
	m := sres.Manifest
	return fmt.Sprintf("packed %d rows of %s (%s %v, %s each) with %d segments by %s into %d blocks at %s, in input order, in %.1fs (%s); mount it with --window L: windows never cross a segment",
		m.Records, strings.Join(sres.Features, ", "), m.DType, m.Shape, ibytes(uint64(m.RecordSize)), sres.Segments, by, len(m.Blocks), dst, secs, rate(m.Bytes, secs))
}

// fieldsSummary is the summary of a pack of an input with fields: "packed 100 samples with
// fields jpg (variable), cls (fixed <i8) from 2 files (1.2 MiB) into blocks of 256 KiB at DST,
// in input order, in 0.1s (...)".
func fieldsSummary(res *pack.FieldsResult, dst string, secs float64) string {
	var names []string
	for _, fl := range res.Manifest.Fields {
		d := string(fl.Kind)
		if fl.DType != "" {
			d += " " + fl.DType
		}
		if len(fl.Shape) > 0 {
			d += fmt.Sprint(fl.Shape)
		}
		names = append(names, fmt.Sprintf("%s (%s)", fl.Name, d))
	}
	how := fmt.Sprintf("blocks of %s", ibytes(uint64(res.BlockSize)))
	if res.AutoBlock {
		how += " (chosen from the input's size; --block-size to set)"
	}
	if res.OneField {
		how += " (one field: a plain dataset, served as epoch-NNNN)"
	}
	for k, m := range res.Compressed {
		if c := compressedText(m); c != "" {
			how += fmt.Sprintf("; field %s%s", res.Manifest.Fields[k].Name, c)
		}
	}
	return fmt.Sprintf("packed %d samples with fields %s from %d %s (%s) into %s at %s, in input order, in %.1fs (%s)",
		res.Manifest.Records, strings.Join(names, ", "), res.Inputs, plural(res.Inputs, "file", "files"), ibytes(uint64(res.Bytes)), how, dst, secs, rate(uint64(res.Bytes), secs))
}
