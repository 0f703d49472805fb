package pack

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/dustin/go-humanize"
)

// WebDataset input: tar shards (POSIX, ustar or GNU, as Python's tarfile and webdataset's
// TarWriter write them; not compressed) whose members sharing a key form one sample, one
// field per extension. The rules are webdataset's (tariterators.py: tar_file_iterator,
// base_plus_ext, group_by_keys), with two exceptions, marked (*):
//
//   - Members that are not regular files (folders, links) are skipped, and so is metadata:
//     a member whose first path component is __NAME__ (webdataset's "__[^/]*__($|/)"), or a
//     top-level name that starts and ends with "__". (*) A link or a device named like a file
//     of a sample that has regular files, for a field some sample has as a regular file,
//     stands where a value was meant, and is refused, named (webdataset_links.go).
//   - A member "dir/0001.seg.jpg" is key "dir/0001" (the path up to the first '.' of the
//     base name) and field "seg.jpg" (the rest, lower-cased: "0001.JPG" is field "jpg"). A
//     member whose base name has no '.' ("README") is skipped, as webdataset does.
//   - (*) A member whose base name starts with '.' (.DS_Store, macOS's ._0001.jpg) is a
//     hidden file and is skipped. webdataset skips these at the top level only: its pattern
//     takes "dir/.x" for key "dir/" and field "x", an accident no shard means.
//   - A sample is a run of consecutive members with one key, in tar order; a sample never
//     spans two shards (webdataset ends a sample at each shard's end), so a key cut across
//     shards is two samples, as webdataset reads it; so is a key repeated later in a shard
//     where every sample is whole, but where a sample lacks a field, a repeated key is a
//     sample's files apart (a tar made in directory order): refused, naming the fix
//     (wds_keys.go). Two members with one field in a sample are refused, as webdataset
//     refuses them.
//   - Samples come in the order of the shards as given, then of the members in each.
//
// The fields are every extension met, in first-seen order, each variable-length opaque bytes.
// A sample missing a field is refused, or given an empty value (0 bytes) with fillMissing; an
// empty value and a missing one are then the same.
//
// Reading is two passes. OpenWebDataset reads every shard's headers (seeking over the data)
// to learn the fields, count the samples, and refuse what it can before anything is packed:
// a name the mount cannot serve, a duplicate, a sample missing a field (without fillMissing),
// a member over MaxWebDatasetMember. Next then reads the shards again, one sample at a time.

// MaxWebDatasetMember is the largest tar member read as a value (1 GiB): one sample is held
// in memory whole.
const MaxWebDatasetMember = 1 << 30

// wdsReader reads the samples of WebDataset shards, one shard open and one sample in memory
// at a time. It is not safe for concurrent use.
type wdsReader struct {
	// Immutable after OpenWebDataset.
	paths   []string
	sizes   []int64
	total   int64
	fill    bool
	fields  []FieldSpec
	index   map[string]int // field name -> position in fields
	samples int64          // counted by the scan
	notes   []string

	i      int        // index in paths of the shard being read (len(paths) after the last)
	sh     *wdsShard  // paths[i], when open
	peek   *wdsMember // the member after the last sample's, its data unread
	prior  int64      // the sizes of the shards before paths[i]
	read   int64      // samples returned
	key    string     // of the last sample returned
	bufs   [][]byte   // one per field, reused
	have   []bool     // which fields the sample being read has
	values [][]byte   // what Next returns
}

// OpenWebDataset returns a SampleReader of the samples of WebDataset tar shards, read in the
// order given. It scans every shard's member headers first (see the rules above); with
// fillMissing, a sample missing a field gets an empty value, else it is refused.
func OpenWebDataset(paths []string, fillMissing bool) (SampleReader, error) {
	sizes, total, err := statInputs(paths, "WebDataset tar")
	if err != nil {
		return nil, err
	}
	sc := &wdsScan{index: map[string]int{}}
	for _, p := range paths {
		if err := sc.shard(p); err != nil {
			return nil, err
		}
	}
	if sc.samples == 0 {
		skipped := ""
		if note := sc.skippedNote(); note != "" {
			skipped = "; " + note
		}
		return nil, fmt.Errorf("the shards hold no samples (no member is a regular file named like KEY.EXTENSION%s): nothing to pack", skipped)
	}
	fields := make([]FieldSpec, len(sc.names))
	for j, name := range sc.names {
		fields[j] = FieldSpec{Name: name, Kind: VariableField}
	}
	for j := range fields { // say which member brought a name the mount cannot serve
		if err := CheckFieldNames(fields[j : j+1]); err != nil {
			at := sc.firstSeen[j]
			return nil, fmt.Errorf("%s: member %q: %w", at.shard, at.member, err)
		}
	}
	if err := CheckFieldNames(fields); err != nil {
		return nil, err
	}
	if sc.hole != nil {
		return nil, sc.hole.holeError()
	}
	if err := sc.keys.apart(); err != nil && sc.lacking() {
		return nil, err // a sample's files apart, not fields to fill
	}
	if !fillMissing {
		for j, name := range sc.names {
			if lack := sc.samples - sc.count[j]; lack > 0 {
				at := sc.firstMissing[j]
				return nil, fmt.Errorf("%s: sample %q has no %q member (%d of %d samples lack one): pass %s to pack an empty %s for them, or fix the data",
					at.shard, at.key, name, lack, sc.samples, optname.Flag("fill-missing"), name)
			}
		}
	}
	w := &wdsReader{
		paths: paths, sizes: sizes, total: total, fill: fillMissing,
		fields: fields, index: sc.index, samples: sc.samples,
		bufs:   make([][]byte, len(fields)),
		have:   make([]bool, len(fields)),
		values: make([][]byte, len(fields)),
	}
	if note := sc.skippedNote(); note != "" {
		w.notes = append(w.notes, note)
	}
	if note := sc.filledNote(fillMissing); note != "" {
		w.notes = append(w.notes, note)
	}
	return w, nil
}

// Fields returns the fields: every extension of the shards, in first-seen order.
func (w *wdsReader) Fields() []FieldSpec { return w.fields }

// Samples returns the number of samples, counted by OpenWebDataset's scan.
func (w *wdsReader) Samples() int64 { return w.samples }

// Name returns the key of the sample Next returned last ("dir/0001"): a name for the record,
// as a folder pack names each record by its path.
func (w *wdsReader) Name() string { return w.key }

// Notes says what the scan skipped, one line each, for pack's summary: members that are not
// regular files (other than folders), hidden, metadata or without an extension.
func (w *wdsReader) Notes() []string { return w.notes }

// Next returns the next sample's values in Fields' order: the members' data, or empty values
// for missing fields with fillMissing.
func (w *wdsReader) Next() ([][]byte, error) {
	for w.peek == nil {
		if w.sh == nil {
			if w.i == len(w.paths) {
				if w.read != w.samples {
					return nil, fmt.Errorf("the shards hold %d samples, %d when they were scanned: did they change while being packed? Pack them again", w.read, w.samples)
				}
				return nil, io.EOF
			}
			sh, err := openWdsShard(w.paths[w.i])
			if err != nil {
				return nil, err
			}
			w.sh = sh
		}
		m, err := w.sh.next()
		if errors.Is(err, io.EOF) {
			w.nextShard()
			continue
		}
		if err != nil {
			return nil, err
		}
		w.peek = m
	}
	sh, key := w.sh, w.peek.key
	clear(w.have)
	for w.peek != nil && w.peek.key == key {
		m := w.peek
		w.peek = nil
		j, ok := w.index[m.field]
		if !ok {
			return nil, fmt.Errorf("%s: member %q has field %q, which the scan did not see: did the shard change while being packed? Pack it again", sh.name, m.name, m.field)
		}
		if w.have[j] {
			return nil, wdsDuplicate(sh.name, key, m.field)
		}
		w.have[j] = true
		if int64(cap(w.bufs[j])) < m.size {
			w.bufs[j] = make([]byte, m.size)
		}
		w.bufs[j] = w.bufs[j][:m.size]
		if err := sh.data(m, w.bufs[j]); err != nil {
			return nil, err
		}
		next, err := sh.next()
		if errors.Is(err, io.EOF) {
			w.nextShard() // a sample ends with its shard
			break
		}
		if err != nil {
			return nil, err
		}
		w.peek = next
	}
	for j, f := range w.fields {
		switch {
		case w.have[j]:
			w.values[j] = w.bufs[j]
		case w.fill:
			w.values[j] = []byte{} // not nil: a value, of 0 bytes
		default:
			return nil, fmt.Errorf("%s: sample %q has no %q member: pass %s to pack an empty %s for it, or fix the data", sh.name, key, f.Name, optname.Flag("fill-missing"), f.Name)
		}
	}
	w.key = key
	w.read++
	return w.values, nil
}

// wdsDuplicate is the error for a sample with two members of one field.
func wdsDuplicate(shard, key, field string) error {
	return fmt.Errorf("%s: sample %q has two %q members (field names are lower-cased): a sample has one value per field; rename or remove one", shard, key, field)
}

// nextShard closes the shard read to its end and moves to the next.
func (w *wdsReader) nextShard() {
	w.sh.close()
	w.sh = nil
	w.prior += w.sizes[w.i]
	w.i++
}

// Progress returns the bytes of the shards read and their total size.
func (w *wdsReader) Progress() (done, total int64) {
	if w.sh == nil {
		return w.prior, w.total
	}
	return w.prior + min(w.sh.count.n, w.sizes[w.i]), w.total
}

// Close closes the shard being read, if any; Next returns io.EOF after it.
func (w *wdsReader) Close() error {
	w.i, w.read = len(w.paths), w.samples
	if w.sh == nil {
		return nil
	}
	err := w.sh.close()
	w.sh = nil
	return err
}

// wdsMember is a tar member that is a sample's field.
type wdsMember struct {
	name  string // as in the tar
	key   string
	field string
	size  int64
}

// wdsKind sorts a tar member by webdataset's rules (see the top of this file).
type wdsKind int

const (
	wdsSampleFile  wdsKind = iota
	wdsFolder              // skipped quietly, as many tars have them
	wdsNotRegular          // a link, a device
	wdsMetadata            // __NAME__
	wdsHidden              // .NAME
	wdsNoExtension         // NAME
)

var wdsKindNames = [...]string{wdsNotRegular: "not regular files", wdsMetadata: "metadata (__NAME__)", wdsHidden: "hidden (.NAME)", wdsNoExtension: "without an extension"}

// wdsClassify returns what a member is, and its key and field when it is a sample's file.
func wdsClassify(h *tar.Header) (kind wdsKind, key, field string) {
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeCont, tar.TypeGNUSparse:
	case tar.TypeDir, tar.TypeXGlobalHeader: // a global header: "git archive" writes one
		return wdsFolder, "", ""
	default:
		return wdsNotRegular, "", ""
	}
	return wdsClassifyName(h.Name)
}

// wdsClassifyName is wdsClassify of a regular file named name.
func wdsClassifyName(name string) (kind wdsKind, key, field string) {
	first, _, nested := strings.Cut(name, "/")
	if len(first) >= 4 && strings.HasPrefix(first, "__") && strings.HasSuffix(first, "__") ||
		!nested && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") {
		return wdsMetadata, "", ""
	}
	dir, base := path.Split(name)
	if strings.HasPrefix(base, ".") {
		return wdsHidden, "", ""
	}
	stem, ext, ok := strings.Cut(base, ".")
	if !ok {
		return wdsNoExtension, "", ""
	}
	return wdsSampleFile, dir + stem, strings.ToLower(ext)
}

// wdsShard reads the members of one tar file.
type wdsShard struct {
	name  string
	f     *os.File
	count countingReader // f, counted
	tr    *tar.Reader
	last  string // the name of the last member read, for errors
}

// openWdsShard opens a shard to read its members' data, through a read buffer.
func openWdsShard(name string) (*wdsShard, error) {
	f, err := openInputFile(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", name, unwrap(err))
	}
	sh := &wdsShard{name: name, f: f}
	sh.count.r = f
	sh.tr = tar.NewReader(bufio.NewReaderSize(&sh.count, 1<<20))
	return sh, nil
}

// next returns the next member that is a sample's file, skipping others; io.EOF at the end.
func (sh *wdsShard) next() (*wdsMember, error) {
	for {
		h, err := sh.header()
		if err != nil {
			return nil, err
		}
		kind, key, field := wdsClassify(h)
		if kind != wdsSampleFile {
			continue
		}
		if err := wdsCheckSize(sh.name, h); err != nil {
			return nil, err
		}
		return &wdsMember{name: h.Name, key: key, field: field, size: h.Size}, nil
	}
}

// wdsCheckSize refuses a member too large to be one value.
func wdsCheckSize(shard string, h *tar.Header) error {
	if h.Size > MaxWebDatasetMember {
		return fmt.Errorf("%s: member %q is %s (%d bytes); a field's value may be at most %s: leave the sample out",
			shard, h.Name, humanize.IBytes(uint64(h.Size)), h.Size, humanize.IBytes(MaxWebDatasetMember))
	}
	return nil
}

// header returns the next member's header; io.EOF at the end of the tar.
func (sh *wdsShard) header() (*tar.Header, error) {
	h, err := sh.tr.Next()
	if errors.Is(err, tar.ErrInsecurePath) {
		err = nil // a name like "../x" or "/x": nothing is written to disk here
	}
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		return nil, sh.damaged(err)
	}
	if err := wdsCheckName(sh.name, h); err != nil {
		return nil, err
	}
	sh.last = h.Name
	return h, nil
}

// maxMemberName bounds a tar member's name: a path longer than Linux's PATH_MAX names no file
// anyone wrote (a PAX header may hold any length; a 1 MB name made every message quoting it a
// megabyte).
const maxMemberName = 4096

// wdsCheckName refuses a member whose name is longer than maxMemberName, quoting its start.
func wdsCheckName(shard string, h *tar.Header) error {
	if len(h.Name) <= maxMemberName {
		return nil
	}
	return fmt.Errorf("%s: a member's name is %d bytes (%q...), longer than the %d a path may have: the shard is damaged or not WebDataset; recreate it or leave it out",
		shard, len(h.Name), h.Name[:64], maxMemberName)
}

// data reads m's data, all of buf.
func (sh *wdsShard) data(m *wdsMember, buf []byte) error {
	if _, err := io.ReadFull(sh.tr, buf); err != nil {
		return sh.damaged(err)
	}
	return nil
}

// damaged wraps an error of the tar reader: the shard, where, what to do.
func (sh *wdsShard) damaged(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = errors.New("the file ends early")
	}
	where := "at its start"
	if sh.last != "" {
		where = fmt.Sprintf("at member %q", sh.last)
	}
	return fmt.Errorf("%s: %s: %v: the shard is damaged, compressed, or not a tar file; recreate it (or decompress it) or leave it out", sh.name, where, unwrap(err))
}

func (sh *wdsShard) close() error { return sh.f.Close() }

// wdsScan is OpenWebDataset's pass over the shards' headers.
type wdsScan struct {
	names        []string       // fields, in first-seen order
	index        map[string]int // name -> position in names
	count        []int64        // samples that have each field
	firstSeen    []wdsPlace     // each field's first member
	firstMissing []wdsPlace     // each field's first sample without it
	first        wdsPlace       // the first sample
	samples      int64          // samples ended
	skipped      [wdsNoExtension + 1]int64
	skippedEx    [wdsNoExtension + 1]wdsPlace // an example of each kind skipped

	// The sample being scanned.
	open bool
	cur  wdsPlace
	have []bool         // by field
	irr  []wdsIrregular // members not regular files named like this sample's or the next's

	hole    *wdsIrregular           // the first member not a regular file where its sample lacks a packed field
	pending map[string]wdsIrregular // by field not packed (yet): the first such member
	keys    wdsKeys                 // the shard's samples so far
}

// wdsPlace is where a sample or member is, for messages.
type wdsPlace struct{ shard, key, member string }

// shard scans one shard's headers, seeking over the data.
func (sc *wdsScan) shard(name string) error {
	f, err := openInputFile(name)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", name, unwrap(err))
	}
	defer f.Close()
	if err := wdsRefuseCompressed(f, name); err != nil {
		return err
	}
	sh := &wdsShard{name: name, f: f, tr: tar.NewReader(f)} // f seeks: Next skips data unread
	for {
		h, err := sh.header()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		kind, key, field := wdsClassify(h)
		if kind != wdsSampleFile {
			if sc.skipped[kind]++; sc.skipped[kind] == 1 {
				sc.skippedEx[kind] = wdsPlace{shard: name, member: h.Name}
			}
			if kind == wdsNotRegular {
				sc.irregular(name, h)
			}
			continue
		}
		if err := wdsCheckSize(name, h); err != nil {
			return err
		}
		if err := sc.member(name, h.Name, key, field); err != nil {
			return err
		}
	}
	sc.end() // a sample ends with its shard
	sc.irr = sc.irr[:0]
	return nil
}

// wdsRefuseCompressed refuses a compressed shard by its magic number, with what to do.
func wdsRefuseCompressed(f *os.File, name string) error {
	var magic [6]byte
	n, _ := io.ReadFull(f, magic[:])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("cannot read %s: %w", name, unwrap(err))
	}
	return refuseCompressed(magic[:n], name, "pack the .tar")
}

// refuseCompressed refuses a file whose first bytes m are a compressor's magic: then names
// what to do with the file once it is decompressed.
func refuseCompressed(m []byte, name, then string) error {
	for _, c := range []struct{ magic, what, tool string }{
		{"\x1f\x8b", "gzip", "gunzip"},
		{"BZh", "bzip2", "bunzip2"},
		{"\xfd7zXZ\x00", "xz", "unxz"},
		{"\x28\xb5\x2f\xfd", "zstd", "unzstd"},
	} {
		if strings.HasPrefix(string(m), c.magic) {
			return fmt.Errorf("%s is %s-compressed: decompress it first (%s), then %s", name, c.what, c.tool, then)
		}
	}
	return nil
}

// member takes one sample file's header.
func (sc *wdsScan) member(shard, name, key, field string) error {
	if !sc.open || key != sc.cur.key {
		sc.keys.start(shard, key, name)
		sc.end()
		sc.open, sc.cur = true, wdsPlace{shard: shard, key: key}
		if sc.samples == 0 {
			sc.first = sc.cur
		}
		sc.irr = slices.DeleteFunc(sc.irr, func(m wdsIrregular) bool { return m.key != key })
	}
	j, ok := sc.index[field]
	if !ok {
		j = len(sc.names)
		sc.index[field] = j
		sc.names = append(sc.names, field)
		sc.count = append(sc.count, 0)
		sc.firstSeen = append(sc.firstSeen, wdsPlace{shard: shard, key: key, member: name})
		missing := wdsPlace{}
		if sc.samples > 0 { // the first sample lacked it
			missing = sc.first
		}
		sc.firstMissing = append(sc.firstMissing, missing)
		sc.have = append(sc.have, false)
		sc.newField(field)
	}
	if sc.have[j] {
		return wdsDuplicate(shard, key, field)
	}
	sc.have[j] = true
	return nil
}

// end ends the sample being scanned, if any.
func (sc *wdsScan) end() {
	if !sc.open {
		return
	}
	sc.holes()
	for j := range sc.names {
		if sc.have[j] {
			sc.count[j]++
		} else if sc.firstMissing[j].shard == "" {
			sc.firstMissing[j] = sc.cur
		}
		sc.have[j] = false
	}
	sc.samples++
	sc.open = false
}
