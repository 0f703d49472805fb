package pack

import (
	"archive/tar"
	"fmt"
)

// A WebDataset member that is not a regular file (a link, a FIFO, a device) is skipped, as
// webdataset skips it; but one named like a file of a sample that has other members stands
// where a value was meant: the scan refuses the sample, naming the member and what it is,
// rather than saying the sample lacks the field.

// wdsIrregular is a member that is not a regular file but is named like a sample's file
// (KEY.EXTENSION): a link or a device where a sample's value was meant.
type wdsIrregular struct {
	wdsPlace
	field string
	what  string // "a symbolic link (to \"x.jpg\")"
	fix   string // what to do
}

// maxIrregular bounds the members not regular files kept for one sample.
const maxIrregular = 8

// irregular takes a member of shard that is not a regular file: named like a sample's file,
// it is kept until the sample of its key ends, to say why that sample lacks the field.
func (sc *wdsScan) irregular(shard string, h *tar.Header) {
	kind, key, field := wdsClassifyName(h.Name)
	if kind != wdsSampleFile || len(sc.irr) == maxIrregular {
		return
	}
	what, fix := wdsTypeName(h)
	sc.irr = append(sc.irr, wdsIrregular{wdsPlace{shard: shard, key: key, member: h.Name}, field, what, fix})
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
