package pack

import (
	"archive/tar"
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/blockfs/blockfs/internal/infiles"

	"github.com/blockfs/blockfs/internal/crc32c"
)

// tar indexes one WebDataset shard: its samples, by webdataset.go's rules, each member's data
// summed as it is read (the tar reader checks each header's checksum).
func (w *indexWriter) tar(sh infiles.Shard, br *bufio.Reader) error {
	magic, _ := br.Peek(6)
	if err := refuseCompressed(magic, sh.Name, "index the .tar"); err != nil {
		return err
	}
	cr := &countingReader{r: br}
	tr := tar.NewReader(cr)
	key, in, last := "", false, ""
	for {
		h, err := tr.Next()
		if errors.Is(err, tar.ErrInsecurePath) {
			err = nil // a name like "../x": nothing is written to disk here
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return indexDamaged(sh.Name, last, err)
		}
		if err := wdsCheckName(sh.Name, h); err != nil {
			return err
		}
		last = h.Name
		kind, k, field := wdsClassify(h)
		if kind == wdsNotRegular {
			// Named like a file of a sample, a link stands where a value was meant: the
			// sample is refused if it lacks that field (as pack refuses it), not given an
			// empty value under --fill-missing.
			if nk, lk, lf := wdsClassifyName(h.Name); nk == wdsSampleFile {
				if len(w.links) == maxIrregular {
					w.links = w.links[1:] // the oldest: a key whose sample never came
				}
				what, fix := wdsTypeName(h)
				w.links = append(w.links, wdsIrregular{wdsPlace: wdsPlace{shard: sh.Name, key: lk, member: h.Name}, field: lf, what: what, fix: fix})
			}
			continue
		}
		if kind != wdsSampleFile {
			continue
		}
		if err := wdsCheckSize(sh.Name, h); err != nil {
			return err
		}
		if !in || k != key {
			if err := w.nextSample(tr, sh.Name, in, key, k, h.Name); err != nil {
				return err
			}
		}
		key, in = k, true
		j, err := w.field(field, fmt.Sprintf("%s: member %q", sh.Name, h.Name))
		if err != nil {
			return err
		}
		if w.vals[j].has {
			return wdsDuplicate(sh.Name, key, field)
		}
		at := cr.n
		if _, err := sumData(tr, h.Size, w.buf, &w.fields[j].crc, w.fields[j].store()); err != nil {
			return indexDamaged(sh.Name, last, err)
		}
		if cr.n-at != h.Size { // a sparse file: its bytes are not where it says
			return fmt.Errorf("%s: member %q is a sparse file (%d bytes stored for %d): its value is not one run of the shard, so it cannot be served in place; pack the shards (blockfs pack) instead",
				sh.Name, h.Name, cr.n-at, h.Size)
		}
		w.vals[j] = indexValue{has: true, at: at, size: h.Size}
	}
	if in {
		return w.endSample(key, sh.Name)
	}
	return nil
}

// indexDamaged is the error of a shard the tar reader cannot read on.
func indexDamaged(shard, last string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = errors.New("the file ends early")
	}
	where := "at its start"
	if last != "" {
		where = fmt.Sprintf("at member %q", last)
	}
	return fmt.Errorf("%s: %s: %v: the shard is damaged or not a tar file; recreate it or leave it out", shard, where, unwrap(err))
}

// sumData reads n bytes of r through buf and returns their CRC32C; it sums them into *acc
// too (a field's block, whose values they continue), and copies them to to unless it is nil
// (a field stored in the index).
func sumData(r io.Reader, n int64, buf []byte, acc *uint32, to io.Writer) (uint32, error) {
	crc := uint32(0)
	for n > 0 {
		k, err := r.Read(buf[:min(int64(len(buf)), n)])
		crc = crc32c.Update(crc, buf[:k])
		*acc = crc32c.Update(*acc, buf[:k])
		if to != nil {
			to.Write(buf[:k])
		}
		n -= int64(k)
		if err != nil && n > 0 {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	return crc, nil
}

// tfrecord indexes one TFRecord file: each record a sample of field "record", its length's
// and data's CRCs checked.
func (w *indexWriter) tfrecord(sh infiles.Shard, br *bufio.Reader) error {
	magic, _ := br.Peek(6)
	if err := refuseCompressed(magic, sh.Name, "index the file"); err != nil {
		return err
	}
	cr := &countingReader{r: br}
	var hdr [tfrHeader]byte
	for rec := 0; ; rec++ {
		at := cr.n
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s: record %d at offset %d: %s: the file is damaged, compressed or not TFRecord; recreate it or leave it out",
				sh.Name, rec, at, fmt.Sprintf(format, args...))
		}
		n, err := io.ReadFull(cr, hdr[:])
		if n == 0 && errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return bad("the file ends early")
		}
		length := binary.LittleEndian.Uint64(hdr[:8])
		if tfrMask(crc32c.Checksum(hdr[:8])) != binary.LittleEndian.Uint32(hdr[8:]) {
			return bad("the length's CRC does not match")
		}
		if length > MaxTFRecord {
			return bad("a length of %d bytes", length)
		}
		crc, err := sumData(cr, int64(length), w.buf, &w.fields[0].crc, w.fields[0].store())
		if err != nil {
			return bad("the file ends early")
		}
		var tail [tfrTrailer]byte
		if _, err := io.ReadFull(cr, tail[:]); err != nil {
			return bad("the file ends early")
		}
		if tfrMask(crc) != binary.LittleEndian.Uint32(tail[:]) {
			return bad("the data's CRC does not match")
		}
		w.vals[0] = indexValue{has: true, at: at + tfrHeader, size: int64(length)}
		if err := w.endSample("", sh.Name); err != nil {
			return err
		}
	}
}

// nextSample ends the sample of key (if in one) and starts that of next at member. A sample
// that lacks a field where a key comes back in its shard (before it, or later: read ahead)
// is a sample's files apart, which is then what to say, not to fill (wds_keys.go).
func (w *indexWriter) nextSample(tr *tar.Reader, shard string, in bool, key, next, member string) error {
	if in {
		if err := w.endSample(key, shard); err != nil {
			var mm missingMember
			if errors.As(err, &mm) {
				return cmp.Or(w.keys.apart(), keysApart(tr, shard, &w.keys, next, member), err)
			}
			return err
		}
	}
	if w.keys.start(shard, next, member) && w.lacked {
		return w.keys.apart()
	}
	return nil
}

// keysApart reads the rest of a shard's members (from the one of key, named member) for a
// sample key that comes back after other samples, and returns wdsKeys.apart's error for the
// first, or nil for none.
func keysApart(tr *tar.Reader, shard string, keys *wdsKeys, key, member string) error {
	if keys.start(shard, key, member) {
		return keys.apart()
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, tar.ErrInsecurePath) {
			err = nil
		}
		if err != nil {
			return nil // the end, or damage the index's own read would have met
		}
		if kind, k, _ := wdsClassify(h); kind == wdsSampleFile && k != key {
			if keys.start(shard, k, h.Name) {
				return keys.apart()
			}
			key = k
		}
	}
}
