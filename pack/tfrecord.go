package pack

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dustin/go-humanize"

	"github.com/blockfs/blockfs/internal/crc32c"
)

// TFRecord input (TensorFlow's tf.io.TFRecordWriter): a file is a run of records, each
//
//	uint64 length (little-endian) | uint32 masked CRC32C of the 8 length bytes |
//	length bytes of data          | uint32 masked CRC32C of the data
//
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (uint32 arithmetic), as TensorFlow's
// crc32c::Mask. A TFRecord input has one field, TFRecordField, a variable-length run of opaque
// bytes: the record (a serialized tf.train.Example, usually), unparsed. Compressed TFRecord
// files (compression_type "GZIP" or "ZLIB") are not read: they must be decompressed first.

// TFRecordField is the name of a TFRecord input's one field.
const TFRecordField = "record"

// MaxTFRecord is the largest TFRecord record read (2 GiB): a longer length is taken for
// damage, so that a bad length never makes the reader allocate or skip gigabytes.
const MaxTFRecord = 2 << 30

const (
	tfrHeader  = 12 // length and its CRC
	tfrTrailer = 4  // the data's CRC
	tfrMaskAdd = 0xa282ead8
)

// tfrMask is TensorFlow's crc32c::Mask of a CRC32C.
func tfrMask(crc uint32) uint32 { return (crc>>15 | crc<<17) + tfrMaskAdd }

// tfrecordReader reads the records of TFRecord files one after another, holding one file open
// and one record in memory (buf, reused). It is not safe for concurrent use.
type tfrecordReader struct {
	// Immutable after OpenTFRecord.
	paths []string
	sizes []int64 // of paths, at OpenTFRecord
	total int64

	i     int           // index in paths of the file being read (len(paths) after the last)
	f     *os.File      // paths[i], when open
	r     *bufio.Reader // reads f
	off   int64         // offset in f of the next record
	rec   int64         // index in f of the next record
	prior int64         // the sizes of the files before paths[i]
	buf   []byte        // the last record's data
	hdr   [tfrHeader]byte
	val   [][]byte // what Next returns: buf
}

// OpenTFRecord returns a SampleReader of the records of TFRecord files, read in the order
// given. It checks that every file can be read and that each starts with a record whose length
// CRC is right (so that a file of another format is refused here, not after packing the ones
// before it); every record's length and data CRCs are checked as Next reads it.
func OpenTFRecord(paths []string) (SampleReader, error) {
	sizes, total, err := statInputs(paths, "TFRecord")
	if err != nil {
		return nil, err
	}
	if total == 0 {
		return nil, fmt.Errorf("the TFRecord files hold no records (they are empty): nothing to pack")
	}
	t := &tfrecordReader{paths: paths, sizes: sizes, total: total}
	for i := range paths {
		if err := t.probe(i); err != nil {
			return nil, err
		}
	}
	t.val = make([][]byte, 1)
	return t, nil
}

// probe checks the first record's header of paths[i], if the file is not empty.
func (t *tfrecordReader) probe(i int) error {
	if t.sizes[i] == 0 {
		return nil
	}
	f, err := openInputFile(t.paths[i])
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", t.paths[i], unwrap(err))
	}
	defer f.Close()
	var head [tfrHeader]byte
	n, err := io.ReadFull(f, head[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("cannot read %s: %w", t.paths[i], unwrap(err))
	}
	p := &tfrecordReader{paths: t.paths, sizes: t.sizes, i: i}
	if head[0] == 0x1f && head[1] == 0x8b {
		return fmt.Errorf("%s is gzip-compressed (a TFRecord file written with compression_type \"GZIP\"?): decompress it first (gunzip), then pack the result", t.paths[i])
	}
	if n < tfrHeader || t.sizes[i] < tfrHeader+tfrTrailer {
		return p.damaged("the file is %d bytes, shorter than a record's header and trailer (16 bytes)", t.sizes[i])
	}
	_, err = p.checkHeader(head[:])
	return err
}

// statInputs checks a list of input files of the kind what (for messages: "TFRecord"): not
// empty, each a regular file. It returns their sizes and the sum.
func statInputs(paths []string, what string) (sizes []int64, total int64, err error) {
	if len(paths) == 0 {
		return nil, 0, fmt.Errorf("no %s files given: give one or more", what)
	}
	sizes = make([]int64, len(paths))
	for i, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, 0, fmt.Errorf("cannot read %s: %w", p, unwrap(err))
		}
		if st.IsDir() {
			return nil, 0, fmt.Errorf("%s is a folder, not a %s file: give the files in it (a glob)", p, what)
		}
		if !st.Mode().IsRegular() {
			return nil, 0, fmt.Errorf("%s is not a regular file", p)
		}
		sizes[i] = st.Size()
		total += st.Size()
	}
	return sizes, total, nil
}

// Fields returns the one field, TFRecordField.
func (t *tfrecordReader) Fields() []FieldSpec {
	return []FieldSpec{{Name: TFRecordField, Kind: VariableField}}
}

// Next returns the next record's data, its CRCs checked.
func (t *tfrecordReader) Next() ([][]byte, error) {
	for {
		if t.f == nil {
			if t.i == len(t.paths) {
				return nil, io.EOF
			}
			if err := t.open(); err != nil {
				return nil, err
			}
		}
		n, err := io.ReadFull(t.r, t.hdr[:])
		switch {
		case err == nil:
		case errors.Is(err, io.EOF): // the file ends between records
			t.nextFile()
			continue
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, t.damaged("a record needs at least %d bytes (a %d-byte header, its data, a %d-byte data CRC) but the file has %d from there, in the header (it is truncated)",
				tfrHeader+tfrTrailer, tfrHeader, tfrTrailer, n)
		default:
			return nil, fmt.Errorf("cannot read %s: %w", t.paths[t.i], unwrap(err))
		}
		length, err := t.checkHeader(t.hdr[:])
		if err != nil {
			return nil, err
		}
		if need, have := tfrHeader+int64(length)+tfrTrailer, t.sizes[t.i]-t.off; need > have {
			return nil, t.truncated(length, need, have)
		}
		if uint64(cap(t.buf)) < length {
			t.buf = make([]byte, length)
		}
		t.buf = t.buf[:length]
		if err := t.read(t.buf, "data"); err != nil {
			return nil, err
		}
		var trailer [tfrTrailer]byte
		if err := t.read(trailer[:], "data CRC"); err != nil {
			return nil, err
		}
		if got, want := tfrMask(crc32c.Checksum(t.buf)), binary.LittleEndian.Uint32(trailer[:]); got != want {
			return nil, t.damaged("the data's CRC32C (masked) is %#08x, the record says %#08x", got, want)
		}
		t.off += tfrHeader + int64(length) + tfrTrailer
		t.rec++
		t.val[0] = t.buf
		return t.val, nil
	}
}

// checkHeader checks a record's header (at t.off of file t.i) and returns its length.
func (t *tfrecordReader) checkHeader(h []byte) (uint64, error) {
	length := binary.LittleEndian.Uint64(h[:8])
	if got, want := tfrMask(crc32c.Checksum(h[:8])), binary.LittleEndian.Uint32(h[8:12]); got != want {
		return 0, t.badHeader("the length's CRC32C (masked) is %#08x, the header says %#08x", got, want)
	}
	if length > MaxTFRecord {
		return 0, t.badHeader("its length is %s (%d bytes), over the %s a record may have",
			humanize.IBytes(length), length, humanize.IBytes(MaxTFRecord))
	}
	return length, nil
}

// truncated is the error for a record, its header read, that the file ends in: need is the
// bytes from t.off the record's length asks for, have those the file has.
func (t *tfrecordReader) truncated(length uint64, need, have int64) error {
	return t.damaged("it needs %d bytes (a %d-byte header, %d bytes of data, a %d-byte data CRC) but the file has %d from there, %d short (it is truncated)",
		need, tfrHeader, length, tfrTrailer, have, need-have)
}

// read reads all of p, part (for messages) of the record at t.off.
func (t *tfrecordReader) read(p []byte, part string) error {
	if _, err := io.ReadFull(t.r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return t.damaged("the file ends in the record's %s, short of the %d bytes it had when the pack began (did it change while being packed?)", part, t.sizes[t.i])
		}
		return fmt.Errorf("cannot read %s: %w", t.paths[t.i], unwrap(err))
	}
	return nil
}

// damaged returns the error for a bad record at t.off of file t.i: the file, the record and
// the offset, what is wrong, and what to do.
func (t *tfrecordReader) damaged(format string, args ...any) error {
	return t.report("", format, args...)
}

// badHeader is damaged for a header that does not check out: at the start of a file, where
// a compressed file is the likely cause, it says so.
func (t *tfrecordReader) badHeader(format string, args ...any) error {
	if t.off == 0 {
		return t.report(" (a compressed one, GZIP or ZLIB, must be decompressed first)", format, args...)
	}
	return t.report("", format, args...)
}

func (t *tfrecordReader) report(hint, format string, args ...any) error {
	return fmt.Errorf("%s: record %d at byte %d: %s: the file is damaged or not a TFRecord file%s; recreate it or leave it out",
		t.paths[t.i], t.rec, t.off, fmt.Sprintf(format, args...), hint)
}

func (t *tfrecordReader) open() error {
	f, err := openInputFile(t.paths[t.i])
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", t.paths[t.i], unwrap(err))
	}
	t.f, t.off, t.rec = f, 0, 0
	if t.r == nil {
		t.r = bufio.NewReaderSize(f, 1<<20)
	} else {
		t.r.Reset(f)
	}
	return nil
}

// nextFile closes the file read to its end and moves to the next.
func (t *tfrecordReader) nextFile() {
	t.f.Close()
	t.f = nil
	t.prior += t.sizes[t.i]
	t.i++
}

// Progress returns the bytes of the files read and their total size.
func (t *tfrecordReader) Progress() (done, total int64) {
	if t.f == nil {
		return t.prior, t.total
	}
	return t.prior + t.off, t.total
}

// Close closes the file being read, if any; Next returns io.EOF after it.
func (t *tfrecordReader) Close() error {
	t.i = len(t.paths)
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}
