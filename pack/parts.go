package pack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/blockfs/blockfs/internal/infiles"
	"github.com/blockfs/blockfs/source/objstore"
	"github.com/blockfs/blockfs/source/stores"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
)

// A pack in parts (pack --part I/N, then pack --merge; docs/FORMAT.md, "Packs in parts"):
// part I packs its share of the inputs into OUT/parts/part-I-of-N/, an ordinary dataset, and
// then writes its part manifest OUT/parts/part-I-of-N.json; the merge writes OUT/blockfs.json
// over the parts' blocks.

// PartFormat and PartVersion identify a part manifest.
const (
	PartFormat  = "blockfs-part"
	PartVersion = 1
	// PartsDir is the folder of OUT that holds the parts.
	PartsDir = "parts"
)

// Part is one part of a pack in parts: Index of Count.
type Part struct{ Index, Count int }

// MaxParts bounds N of a pack or an index in parts wherever N is read: the command line, a
// part's file or folder name, a part manifest.
const MaxParts = 1 << 20

// ParsePart reads pack --part's value, "I/N" with 0 <= I < N <= MaxParts.
func ParsePart(s string) (Part, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || !(Part{i, n}).valid() {
		return Part{}, optname.Errorf("part", "%s %q is not I/N with 0 <= I < N <= %d (part 0/4 is the first of 4)", optname.Flag("part"), s, MaxParts)
	}
	return Part{Index: i, Count: n}, nil
}

// valid reports whether 0 <= I < N <= MaxParts.
func (p Part) valid() bool {
	return p.Count >= 1 && p.Count <= MaxParts && p.Index >= 0 && p.Index < p.Count
}

// partName parses a part's name, "part-I-of-N" followed by suffix ("" for a folder, ".json"
// for a part manifest). ok is false for a name of another shape; err says why a name of that
// shape names no part (I >= N, N > MaxParts, digits that are not the number's spelling).
func partName(name, suffix string) (p Part, ok bool, err error) {
	rest, found := strings.CutPrefix(name, "part-")
	if rest, found = strings.CutSuffix(rest, suffix); !found || !strings.HasPrefix(name, "part-") {
		return Part{}, false, nil
	}
	a, b, found := strings.Cut(rest, "-of-")
	if !found || !allDigits(a) || !allDigits(b) {
		return Part{}, false, nil
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	p = Part{i, n}
	if err1 != nil || err2 != nil || !p.valid() || p.Name()+suffix != name {
		return Part{}, true, fmt.Errorf("%s is not a part's name: part I of N is part-I-of-N%s with 0 <= I < N <= %d; remove it", name, suffix, MaxParts)
	}
	return p, true, nil
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// Name is the part's name: its dataset's folder in OUT/parts, and its manifest's name
// without ".json": "part-1-of-4".
func (p Part) Name() string { return fmt.Sprintf("part-%d-of-%d", p.Index, p.Count) }

// Share returns the inputs part p takes of n: [floor(I*n/N), floor((I+1)*n/N)). The shares of
// the N parts cover 0..n-1 once, in order; a part may get none (when n < N).
func (p Part) Share(n int) (lo, hi int) {
	return int(int64(p.Index) * int64(n) / int64(p.Count)), int(int64(p.Index+1) * int64(n) / int64(p.Count))
}

// PartSeed is the pre-shuffle seed of part i of a pack with seed seed:
// shuffle.Derive(seed, shuffle.DomainPackAssign, i+1, 0). (One pack pre-shuffles with the seed
// itself; epoch 0 of the domain is its stream, so no part's stream is one pack's.)
func PartSeed(seed uint64, i int) uint64 {
	return shuffle.Derive(seed, shuffle.DomainPackAssign, uint64(i)+1, 0)
}

// PartOptions are the options of a pack in parts that every part must agree on. Kind, the
// record size, dtype and shape come from the part's records (an empty part has only what the
// flags say).
type PartOptions struct {
	Format     Format      `json:"format"`
	Kind       layout.Kind `json:"kind,omitempty"`
	RecordSize int64       `json:"record_size,omitempty"`
	DType      string      `json:"dtype,omitempty"`
	Shape      []int64     `json:"shape,omitempty"`
	BlockSize  int64       `json:"block_size"`
	Seed       uint64      `json:"seed"`
	NoShuffle  bool        `json:"no_shuffle"`
	SkipHeader bool        `json:"skip_header,omitempty"`
	Compress   string      `json:"compress,omitempty"` // --compress (CompressText)
	// Columns and FillMissing are those of an input with fields (FieldOptions).
	Columns     []string `json:"columns,omitempty"`
	FillMissing bool     `json:"fill_missing,omitempty"`
}

// PartManifest is a part's manifest, OUT/parts/part-I-of-N.json, written last by the part.
type PartManifest struct {
	Format       string      `json:"format"`
	Version      int         `json:"version"`
	Part         int         `json:"part"`
	Parts        int         `json:"parts"`
	InputsDigest string      `json:"inputs_digest"`
	Options      PartOptions `json:"options"`
	Records      uint64      `json:"records"`
	Dataset      string      `json:"dataset"`
	Source       string      `json:"source,omitempty"`
	// Fields are the part's fields when its samples have several (their datasets in
	// OUT/fields/NAME/parts/part-I-of-N/); empty otherwise.
	Fields []layout.Field `json:"fields,omitempty"`
}

// PartResult says what PackPart did.
type PartResult struct {
	Manifest *PartManifest
	Result   *Result // the part's pack; nil for an empty part
	Inputs   int     // the inputs the part took
	All      int     // the inputs of all parts
}

// inputFile is one input of a pack in parts (a file of a folder, for format files).
type inputFile struct {
	path string
	size int64
}

// PackPart packs part p of inputs (ExpandInputs's) into out/parts/p.Name(), replacing what
// an earlier run of the part left, and writes the part manifest last, atomically. opt is a
// pack's options; opt.Seed is the pack's seed (the part pre-shuffles with PartSeed). out may
// not hold a merged dataset unless opt.Force, which removes its manifest first (the part
// replaces blocks it names): the dataset is gone until the next merge.
func PackPart(ctx context.Context, inputs []string, out string, p Part, opt Options) (*PartResult, error) {
	write := func(o Options, pack func(dst string, o Options) error) error {
		dir := filepath.Join(out, PartsDir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return pack(filepath.Join(dir, p.Name()), o)
	}
	empty := func() error { return os.RemoveAll(filepath.Join(out, PartsDir, p.Name())) }
	return packPart(ctx, inputs, dirOut{out}, &fieldPart{top: out, part: p}, opt, write, empty)
}

// PackPartToStore is PackPart into the object store's prefix url: the part's dataset is
// uploaded to url/parts/part-I-of-N/ as a pack to a store is (ToStore: each block as it is
// written, its manifest last), or for samples of several fields each field's to
// url/fields/NAME/parts/part-I-of-N/ (storeFieldsPart), then the part manifest
// url/parts/part-I-of-N.json.
func PackPartToStore(ctx context.Context, inputs []string, url string, p Part, opt Options, store objstore.Options) (*PartResult, error) {
	st, err := stores.Open(url, store)
	if err != nil {
		return nil, openStoreError{err}
	}
	sub := strings.TrimSuffix(url, "/") + "/" + PartsDir + "/" + p.Name()
	write := func(o Options, pack func(dst string, o Options) error) error {
		if err := ToStore(ctx, sub, store, true, false, o, pack); !errors.Is(err, errFieldsStored) {
			return err
		}
		return nil // samples of several fields: stored in the fields' folders (storeFieldsPart)
	}
	fp := &fieldPart{part: p, store: &fieldStore{ctx: ctx, url: strings.TrimSuffix(url, "/"), opt: store}}
	return packPart(ctx, inputs, &storeOut{ctx: ctx, st: st}, fp, opt, write, func() error { return nil })
}

// packPart is PackPart into out: write packs the part's dataset with the function it is given,
// empty clears what an earlier run left of an empty part's.
func packPart(ctx context.Context, inputs []string, out partsOut, fp *fieldPart, opt Options,
	write func(o Options, pack func(dst string, o Options) error) error, empty func() error) (*PartResult, error) {
	p := fp.part
	for _, name := range []string{layout.FieldsManifestName, layout.ManifestName} {
		if _, err := out.size(name); err != nil {
			continue
		}
		if !opt.Force {
			return nil, fmt.Errorf("%s holds a merged dataset already; give %s to pack its parts again", out.location(), optname.Flag("force"))
		}
		// The part replaces blocks the merged dataset names: it is gone until the next merge.
		if err := out.remove(name); err != nil {
			return nil, err
		}
	}
	format, files, popt, err := partInputs(inputs, opt)
	if err != nil {
		return nil, err
	}
	fp.all = files
	lo, hi := p.Share(len(files))
	pm := &PartManifest{Format: PartFormat, Version: PartVersion, Part: p.Index, Parts: p.Count,
		InputsDigest: inputsDigest(files), Options: popt, Dataset: p.Name()}
	manifest := path.Join(PartsDir, p.Name()+".json")
	if err := out.remove(manifest); err != nil {
		return nil, err
	}
	pr := &PartResult{Manifest: pm, Inputs: hi - lo, All: len(files)}
	if lo == hi {
		err = empty()
	} else {
		opt.Seed, opt.BlockSize, opt.Force, opt.Format = PartSeed(opt.Seed, p.Index), popt.BlockSize, true, format
		err = write(opt, func(dst string, o Options) error {
			var err error
			pr.Result, err = packShare(ctx, inputs, files[lo:hi], dst, o, &Result{Format: format}, fp)
			return err
		})
		if errors.Is(err, layout.ErrNoRecords) { // its inputs are empty: so is the part
			pr.Result, err = nil, empty()
		}
	}
	if err != nil {
		return nil, err
	}
	if pr.Result != nil {
		m := pr.Result.Manifest
		pm.Records, pm.Source = m.Records, m.Source
		pm.Options.Kind, pm.Options.RecordSize, pm.Options.DType, pm.Options.Shape = m.Kind, m.RecordSize, m.DType, m.Shape
		if fp.m != nil { // several fields: the summary's element is the anchor field's
			pm.Source, pm.Fields = fp.m.Source, fp.m.Fields
			pm.Options.Kind, pm.Options.RecordSize, pm.Options.DType, pm.Options.Shape = "", 0, "", nil
		}
	}
	data, err := json.MarshalIndent(pm, "", " ")
	if err != nil {
		return nil, err
	}
	return pr, out.write(manifest, append(data, '\n'))
}

// partInputs resolves the inputs of a pack in parts: their format, the inputs of all parts
// with their sizes (listInputs) and the options every part must agree on.
func partInputs(inputs []string, opt Options) (Format, []inputFile, PartOptions, error) {
	sel, err := newSelection(opt)
	if err != nil {
		return "", nil, PartOptions{}, err
	}
	format, err := partFormat(inputs, opt)
	if err != nil {
		return "", nil, PartOptions{}, err
	}
	files, err := listInputs(inputs, format, sel, &Result{})
	if err != nil {
		return "", nil, PartOptions{}, err
	}
	popt, err := partOptions(files, format, opt)
	return format, files, popt, err
}

// partFormat is the format of the inputs: opt.Format, or what the first input is (Detect).
func partFormat(inputs []string, opt Options) (Format, error) {
	format := opt.Format
	if ff, ok := DetectFields(inputs[0]); ok && (format == "" || format == Auto) {
		format = ff
	}
	if ff, _, ok := infiles.DetectShards(inputs[0]); ok && len(inputs) == 1 && (format == "" || format == Auto) && folderOfShards(opt) {
		format = Format(ff) // a folder of nothing but shards is read as its glob is, as by one pack
	}
	if format.HasFields() {
		return format, fieldOptionsApply(opt, format)
	}
	if format == "" || format == Auto {
		var err error
		if format, err = Detect(inputs[0]); err != nil {
			if opt.RecordSize == 0 || !errors.As(err, new(unknownFormatError)) {
				return "", err
			}
			format = Raw
		}
	}
	if err := optionsApply(opt, format, inputs[0]); err != nil {
		return "", err
	}
	if format == Files && len(inputs) != 1 {
		return "", fmt.Errorf("%s files packs one folder (its files are shared between the parts); got %d inputs", optname.Flag("format"), len(inputs))
	}
	return format, nil
}

// listInputs returns the inputs of all parts with their sizes: the input files, or for
// format files the files of the folder that a pack of it would pack, in its order.
func listInputs(inputs []string, format Format, sel *selection, res *Result) ([]inputFile, error) {
	if format == Files {
		in, _, err := openFiles(inputs[0], sel)
		res.Skipped = sel.skipped
		if err != nil {
			return nil, err
		}
		// The sizes are the listing's, not a stat by path (which followed symlinks on the path).
		in.close()
		return in.(*filesInput).files, nil
	}
	if format.HasFields() {
		var err error
		if inputs, err = expandFieldInputs(inputs, format); err != nil {
			return nil, err
		}
	}
	files := make([]inputFile, len(inputs))
	for i, p := range inputs {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("cannot read the input: %w", err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file (%s %s takes files)", p, optname.Flag("format"), format)
		}
		files[i] = inputFile{path: p, size: st.Size()}
	}
	return files, nil
}

// partOptions resolves the options every part must agree on: the block size (given, or
// AutoBlockSize of all the inputs, as one pack of them would choose) and, for raw and npy, the
// record size (npy: the first input's rows).
func partOptions(files []inputFile, format Format, opt Options) (PartOptions, error) {
	po := PartOptions{Format: format, RecordSize: opt.RecordSize, BlockSize: opt.BlockSize, Seed: opt.Seed, NoShuffle: opt.NoShuffle, SkipHeader: opt.SkipHeader,
		Compress: CompressText(opt.Compress)}
	if format.HasFields() { // its samples keep their input order
		po.NoShuffle, po.Columns, po.FillMissing = true, opt.Fields.Columns, opt.Fields.FillMissing
	}
	if po.BlockSize > 0 {
		return po, nil
	}
	rs := opt.RecordSize
	if format == Npy {
		in, el, err := openNpy(files[0].path, opt.RecordSize, true)
		if err != nil {
			return po, err
		}
		in.close()
		rs = el.recordSize
	}
	var total int64
	for _, f := range files {
		total += f.size
	}
	po.BlockSize = AutoBlockSize(total, rs)
	return po, nil
}

// inputsDigest is the SHA-256, in hex, of the inputs' paths and sizes, one "path\x00size\n"
// each in order: parts of other inputs do not merge.
func inputsDigest(files []inputFile) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\n", f.path, f.size)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// packShare packs the part's share of the inputs, files, into dst. inputs are all the inputs
// (for format files, the folder); fp is where a part of several fields goes.
func packShare(ctx context.Context, inputs []string, files []inputFile, dst string, opt Options, res *Result, fp *fieldPart) (*Result, error) {
	if opt.Format.HasFields() {
		return packFieldShare(ctx, files, dst, opt, res, fp)
	}
	var in input
	var el element
	switch opt.Format {
	case Files:
		fi := &filesInput{root: inputs[0], files: files}
		for _, f := range files {
			fi.n += f.size
		}
		in, el = fi, element{kind: layout.Variable}
	default:
		paths, sizes := make([]string, len(files)), make([]int64, len(files))
		for i, f := range files {
			paths[i], sizes[i] = f.path, f.size
		}
		m, err := openMulti(paths, sizes, func(p string) (input, element, error) { return openPlain(p, opt) })
		if err != nil {
			return nil, err
		}
		in, el = m, m.el
	}
	defer in.close()
	return packInput(ctx, in, el, dst, filepath.Base(files[0].path), opt, res)
}

// openPlain opens one input of a raw, npy or lines pack in parts.
func openPlain(path string, opt Options) (input, element, error) {
	switch opt.Format {
	case Raw:
		return openRaw(path, opt.RecordSize, true)
	case Npy:
		return openNpy(path, opt.RecordSize, true)
	case Lines:
		return openLines(path, opt.SkipHeader, true)
	}
	return nil, element{}, fmt.Errorf("unknown format %q", opt.Format)
}

// folderOfShards reports whether opt leaves a folder free to be read as shards with fields
// (infiles.DetectShards): no option of a folder of files given, as the command line decides for one
// pack (a record size, a header to skip, input order kept, files chosen or all files).
func folderOfShards(opt Options) bool {
	return opt.RecordSize == 0 && !opt.SkipHeader && !opt.NoShuffle && len(opt.Include)+len(opt.Exclude) == 0 && !opt.AllFiles
}
