package pack

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
)

// python is the interpreter the tests write their inputs with: an independent writer (Python's
// tarfile, a pure-Python CRC32C), not the code under test.
const python = "/usr/bin/python3"

// runPython runs script with args, or skips the test where there is no python3.
func runPython(t *testing.T, script string, args ...string) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s to write the test's inputs", python)
	}
	p := filepath.Join(t.TempDir(), "write.py")
	require.NoError(t, os.WriteFile(p, []byte(script), 0o644))
	out, err := exec.Command(python, append([]string{p}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// tfrecordPy writes TFRecord files as tf.io.TFRecordWriter does, with a pure-Python CRC32C
// (table-driven, checked against the standard check value): argv[1] is a JSON object of file
// path -> list of records in hex.
const tfrecordPy = `
import json, struct, sys

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TABLE.append(c)

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

assert crc32c(b"123456789") == 0xE3069283

with open(sys.argv[1]) as f:
    files = json.load(f)
for path, records in files.items():
    with open(path, "wb") as out:
        for rec in records:
            data = bytes.fromhex(rec)
            length = struct.pack("<Q", len(data))
            out.write(length)
            out.write(struct.pack("<I", masked(length)))
            out.write(data)
            out.write(struct.pack("<I", masked(data)))
`

// writeTFRecordsPy writes files (path -> records) with tfrecordPy.
func writeTFRecordsPy(t *testing.T, files map[string][][]byte) {
	t.Helper()
	spec := map[string][]string{}
	for p, recs := range files {
		spec[p] = []string{}
		for _, r := range recs {
			spec[p] = append(spec[p], hex.EncodeToString(r))
		}
	}
	js, err := json.Marshal(spec)
	require.NoError(t, err)
	sp := filepath.Join(t.TempDir(), "spec.json")
	require.NoError(t, os.WriteFile(sp, js, 0o644))
	runPython(t, tfrecordPy, sp)
}

// testRecords returns records of many sizes: empty, one byte, around the read buffer's size.
func testRecords(seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	var recs [][]byte
	for _, n := range []int{0, 1, 7, 12, 16, 100, 4095, 4096, 70000, 1<<20 + 3, 5, 0, 333} {
		r := make([]byte, n)
		for i := range r {
			r[i] = byte(rng.Uint32())
		}
		recs = append(recs, r)
	}
	return recs
}

// readRecords reads every record of r, copied.
func readRecords(t *testing.T, r SampleReader) ([][]byte, error) {
	t.Helper()
	var got [][]byte
	lastDone := int64(0)
	for {
		v, err := r.Next()
		done, total := r.Progress()
		assert.GreaterOrEqual(t, done, lastDone, "progress goes forward")
		assert.LessOrEqual(t, done, total)
		lastDone = done
		if errors.Is(err, io.EOF) {
			assert.Equal(t, total, done, "progress is complete at the end")
			return got, nil
		}
		if err != nil {
			return got, err
		}
		require.Len(t, v, 1)
		got = append(got, bytes.Clone(v[0]))
	}
}

func TestTFRecordPythonAndGoWritersAgree(t *testing.T) {
	dir := t.TempDir()
	recs := testRecords(1)
	py := filepath.Join(dir, "py.tfrecord")
	writeTFRecordsPy(t, map[string][][]byte{py: recs})
	b, err := os.ReadFile(py)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(dstest.TFRecord(recs), b), "the pure-Python and the Go writer make the same bytes")

	r, err := OpenTFRecord([]string{py})
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []FieldSpec{{Name: "record", Kind: VariableField}}, r.Fields())
	require.NoError(t, CheckFieldNames(r.Fields()))
	got, err := readRecords(t, r)
	require.NoError(t, err)
	require.Equal(t, len(recs), len(got))
	for i := range recs {
		assert.True(t, bytes.Equal(recs[i], got[i]), "record %d", i)
	}
	_, err = r.Next()
	assert.ErrorIs(t, err, io.EOF, "EOF again after the end")
}

// TestTFRecordSeveralFiles reads three files (one empty) in the order given, not sorted.
func TestTFRecordSeveralFiles(t *testing.T) {
	dir := t.TempDir()
	recs := testRecords(2)
	c, b, a := filepath.Join(dir, "c.tfrecord"), filepath.Join(dir, "b.tfrecord"), filepath.Join(dir, "a.tfrecord")
	writeTFRecordsPy(t, map[string][][]byte{c: recs[:4], b: nil, a: recs[4:]})
	r, err := OpenTFRecord([]string{c, b, a})
	require.NoError(t, err)
	got, err := readRecords(t, r)
	require.NoError(t, err)
	require.Equal(t, len(recs), len(got))
	for i := range recs {
		assert.True(t, bytes.Equal(recs[i], got[i]), "record %d", i)
	}
	require.NoError(t, r.Close())
	require.NoError(t, r.Close(), "Close twice")
	_, err = r.Next()
	assert.ErrorIs(t, err, io.EOF, "EOF after Close")
}

// TestTFRecordNextReusesItsBuffer: a value is valid until the next Next, and the reader does
// not allocate a buffer per record.
func TestTFRecordNextReusesItsBuffer(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.tfrecord")
	recs := [][]byte{bytes.Repeat([]byte("a"), 1000), []byte("bb"), bytes.Repeat([]byte("c"), 900)}
	require.NoError(t, os.WriteFile(p, dstest.TFRecord(recs), 0o644))
	r, err := OpenTFRecord([]string{p})
	require.NoError(t, err)
	defer r.Close()
	v1, err := r.Next()
	require.NoError(t, err)
	first := &v1[0][0]
	for _, want := range recs[1:] {
		v, err := r.Next()
		require.NoError(t, err)
		assert.Equal(t, want, v[0])
		assert.Same(t, first, &v[0][0], "the same buffer")
	}
}

// corrupt returns a copy of b with f applied.
func corrupt(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }

// TestTFRecordDamage checks each kind of damage: the records before it come back intact, and
// the error names the file, the record and its offset, says what is wrong and what to do.
func TestTFRecordDamage(t *testing.T) {
	dir := t.TempDir()
	recs := testRecords(3)[:8] // sizes 0 1 7 12 16 100 4095 4096
	good := filepath.Join(dir, "good.tfrecord")
	writeTFRecordsPy(t, map[string][][]byte{good: recs})
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	offset := func(k int) int { // of record k
		off := 0
		for _, r := range recs[:k] {
			off += 16 + len(r)
		}
		return off
	}
	const k = 5 // the damaged record: 100 bytes
	for _, c := range []struct {
		name  string
		bytes []byte
		k     int // the record the error names
		want  string
	}{
		{"data byte", corrupt(b, func(b []byte) []byte { b[offset(k)+12+50] ^= 0x10; return b }), k,
			"the data's CRC32C (masked) is"},
		{"data CRC", corrupt(b, func(b []byte) []byte { b[offset(k+1)-1] ^= 1; return b }), k,
			"the data's CRC32C (masked) is"},
		{"length byte", corrupt(b, func(b []byte) []byte { b[offset(k)] ^= 0x01; return b }), k,
			"the length's CRC32C (masked) is"},
		{"length high byte", corrupt(b, func(b []byte) []byte { b[offset(k)+6] = 0xff; return b }), k,
			"the length's CRC32C (masked) is"},
		{"length CRC", corrupt(b, func(b []byte) []byte { b[offset(k)+9] ^= 0x80; return b }), k,
			"the length's CRC32C (masked) is"},
		{"huge length, right CRC", corrupt(b, func(b []byte) []byte {
			hdr := binary.LittleEndian.AppendUint64(nil, 3<<30) // a 3 GiB record, its CRC right
			copy(b[offset(k):], binary.LittleEndian.AppendUint32(hdr, dstest.TFRecordMask(hdr)))
			return b
		}), k, "its length is 3.0 GiB (3221225472 bytes), over the 2.0 GiB a record may have"},
		{"truncated in the data", b[:offset(k)+12+40], k,
			"it needs 116 bytes (a 12-byte header, 100 bytes of data, a 4-byte data CRC) but the file has 52 from there, 64 short (it is truncated)"},
		{"truncated in the data CRC", b[:offset(k+1)-2], k,
			"it needs 116 bytes (a 12-byte header, 100 bytes of data, a 4-byte data CRC) but the file has 114 from there, 2 short (it is truncated)"},
		{"truncated in the header", b[:offset(k)+5], k,
			"a record needs at least 16 bytes (a 12-byte header, its data, a 4-byte data CRC) but the file has 5 from there, in the header (it is truncated)"},
		{"trailing garbage", append(bytes.Clone(b), "garbage!garbage!"...), len(recs),
			"the length's CRC32C (masked) is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bad.tfrecord")
			require.NoError(t, os.WriteFile(p, c.bytes, 0o644))
			r, err := OpenTFRecord([]string{p})
			require.NoError(t, err, "the first record is good")
			defer r.Close()
			got, err := readRecords(t, r)
			require.Error(t, err)
			require.Len(t, got, c.k, "the records before the damage come back")
			for i := range got {
				assert.True(t, bytes.Equal(recs[i], got[i]), "record %d", i)
			}
			msg := err.Error()
			at := offset(c.k)
			if c.k == len(recs) {
				at = len(b)
			}
			assert.Contains(t, msg, p+": record "+strconv.Itoa(c.k)+" at byte "+strconv.Itoa(at)+": ")
			assert.Contains(t, msg, c.want)
			assert.Contains(t, msg, "the file is damaged or not a TFRecord file; recreate it or leave it out")
			assert.NotContains(t, msg, "\n")
			assert.NotContains(t, msg, "compressed", "no hint about compression past a file's start")
		})
	}
}

// TestTFRecordOpenRefusals: what Open refuses, before any record is read, in one line each.
func TestTFRecordOpenRefusals(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tfrecord")
	require.NoError(t, os.WriteFile(good, dstest.TFRecord(testRecords(4)[:3]), 0o644))
	empty := filepath.Join(dir, "empty.tfrecord")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("this is not a TFRecord file at all\n"), 0o644))
	short := filepath.Join(dir, "short.tfrecord")
	require.NoError(t, os.WriteFile(short, dstest.TFRecord([][]byte{{}})[:15], 0o644))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(dstest.TFRecord(testRecords(4)[:3]))
	require.NoError(t, zw.Close())
	gzp := filepath.Join(dir, "data.tfrecord.gz")
	require.NoError(t, os.WriteFile(gzp, gz.Bytes(), 0o644))
	firstBad := filepath.Join(dir, "first-bad.tfrecord")
	require.NoError(t, os.WriteFile(firstBad, corrupt(dstest.TFRecord(testRecords(4)[:3]), func(b []byte) []byte { b[0]++; return b }), 0o644))

	for _, c := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"no files", nil, "no TFRecord files given: give one or more"},
		{"missing", []string{good, filepath.Join(dir, "nope.tfrecord")}, "cannot read " + filepath.Join(dir, "nope.tfrecord") + ": no such file or directory"},
		{"folder", []string{dir}, dir + " is a folder, not a TFRecord file: give the files in it (a glob)"},
		{"only empty files", []string{empty, empty}, "the TFRecord files hold no records (they are empty): nothing to pack"},
		{"a text file after a good one", []string{good, text}, text + ": record 0 at byte 0: the length's CRC32C (masked) is"},
		{"the hint at a file's start", []string{text}, "the file is damaged or not a TFRecord file (a compressed one, GZIP or ZLIB, must be decompressed first); recreate it or leave it out"},
		{"a bad first record", []string{firstBad}, firstBad + ": record 0 at byte 0: the length's CRC32C (masked) is"},
		{"shorter than a record", []string{short}, short + ": record 0 at byte 0: the file is 15 bytes, shorter than a record's header and trailer (16 bytes): the file is damaged"},
		{"gzip", []string{gzp}, gzp + " is gzip-compressed (a TFRecord file written with compression_type \"GZIP\"?): decompress it first (gunzip), then pack the result"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := OpenTFRecord(c.paths)
			require.Error(t, err)
			assert.Nil(t, r)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}
