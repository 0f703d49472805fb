package pack

import (
	"archive/tar"
	"fmt"
	"slices"
)

// A WebDataset member that is not a regular file (a link, a FIFO, a device) is skipped, as
// webdataset skips it; but one named like a file of a sample that has other members, for a
// field the dataset packs (one some sample has as a regular file), stands where a value was
// meant: the scan refuses the sample, naming the member and what it is, rather than saying
// the sample lacks the field (or packing an empty value with --fill-missing). A link for a
// field no sample has as a regular file (every sample's .license linked to one file) is
// skipped, as before.

// wdsIrregular is a member that is not a regular file but is named like a sample's file
// (KEY.EXTENSION): a link or a device where a sample's value was meant.
type wdsIrregular struct {
	wdsPlace
	field  string
	what   string // "a symbolic link (to \"x.jpg\")"
	fix    string // what to do
	sample int64  // the ordinal of its sample, once that has ended
}

// maxIrregular bounds the members not regular files kept for the sample being scanned and
// the key after it (one per field each); the links of other keys are not kept.
const maxIrregular = 256

// maxPendingLinks bounds the fields kept whose first link (in a sample without the field) came
// before any sample had the field as a regular file.
const maxPendingLinks = 4096

// irregular takes a member of shard that is not a regular file: named like a sample's file,
// it is kept until the sample of its key ends, to say why that sample lacks the field.
func (sc *wdsScan) irregular(shard string, h *tar.Header) {
	kind, key, field := wdsClassifyName(h.Name)
	if kind != wdsSampleFile {
		return
	}
	// Only the open sample's members matter, and this key's (its sample may follow): a link
	// never ends a sample, as webdataset groups regular files only.
	sc.irr = slices.DeleteFunc(sc.irr, func(m wdsIrregular) bool {
		return m.key != key && (!sc.open || m.key != sc.cur.key)
	})
	if len(sc.irr) == maxIrregular || slices.ContainsFunc(sc.irr, func(m wdsIrregular) bool {
		return m.key == key && m.field == field
	}) {
		return
	}
	what, fix := wdsTypeName(h)
	sc.irr = append(sc.irr, wdsIrregular{wdsPlace{shard: shard, key: key, member: h.Name}, field, what, fix, 0})
}

// holes takes, as the sample being scanned ends, its members not regular files for fields it
// lacks: a hole where the field is packed already, else pending until a sample has it as a
// regular file (newField).
func (sc *wdsScan) holes() {
	for _, m := range sc.irr {
		if m.key != sc.cur.key {
			continue
		}
		j, ok := sc.index[m.field]
		if ok && sc.have[j] {
			continue
		}
		m.sample = sc.samples
		if ok {
			sc.noteHole(m)
		} else if _, seen := sc.pending[m.field]; !seen && len(sc.pending) < maxPendingLinks {
			if sc.pending == nil {
				sc.pending = map[string]wdsIrregular{}
			}
			sc.pending[m.field] = m
		}
	}
}

// newField is called when a sample first has field as a regular file: a member not a
// regular file for it in an earlier sample becomes a hole.
func (sc *wdsScan) newField(field string) {
	if m, ok := sc.pending[field]; ok {
		delete(sc.pending, field)
		sc.noteHole(m)
	}
}

// noteHole keeps the hole of the earliest sample.
func (sc *wdsScan) noteHole(m wdsIrregular) {
	if sc.hole == nil || m.sample < sc.hole.sample {
		sc.hole = &m
	}
}

// holeError is the error for a sample whose field is a member not a regular file.
func (m *wdsIrregular) holeError() error {
	return fmt.Errorf("%s: sample %q: member %q is %s; WebDataset members must be regular files: %s",
		m.shard, m.key, m.member, m.what, m.fix)
}

// wdsTypeName says what a tar member that is not a regular file is, and what to do.
func wdsTypeName(h *tar.Header) (what, fix string) {
	const remove = "put the sample's value there as a regular file, or remove the member"
	switch h.Typeflag {
	case tar.TypeSymlink:
		return fmt.Sprintf("a symbolic link (to %q)", h.Linkname), "store the file it links to (tar --dereference), or remove the member"
	case tar.TypeLink:
		return fmt.Sprintf("a hard link (to %q)", h.Linkname), "store the file itself (tar --hard-dereference), or remove the member"
	case tar.TypeFifo:
		return "a named pipe (FIFO)", remove
	case tar.TypeChar:
		return "a character device", remove
	case tar.TypeBlock:
		return "a block device", remove
	}
	return fmt.Sprintf("not a regular file (tar type %q)", h.Typeflag), remove
}
