//go:build tables

package pack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Parquet files with page CRCs, written here byte by byte (arrow-go, which pack reads with,
// writes no CRCs; neither does DuckDB, which wrote test/testdata/parquet): the format's
// Thrift structures in the compact protocol, PLAIN and uncompressed, so that every byte of a
// page's body is a value's. The CRC check was also run on parquet-mr's files with CRCs in
// apache/parquet-testing (datapage_v1-*-checksum, plain-dict-uncompressed-checksum,
// rle-dict-*-checksum): the sound ones pass, the two corrupt ones are refused.

// compactWriter writes Thrift's compact protocol.
type compactWriter struct {
	b    []byte
	last []int16 // the last field id, by open struct
}

func (w *compactWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *compactWriter) varint(v int64)   { w.uvarint(uint64(v<<1) ^ uint64(v>>63)) }

// field writes a field header of id and type t (in the struct opened last).
func (w *compactWriter) field(id int16, t byte) {
	last := &w.last[len(w.last)-1]
	if d := id - *last; d > 0 && d <= 15 {
		w.b = append(w.b, byte(d)<<4|t)
	} else {
		w.b = append(w.b, t)
		w.varint(int64(id))
	}
	*last = id
}

func (w *compactWriter) i32(id int16, v int32) { w.field(id, tcI32); w.varint(int64(v)) }
func (w *compactWriter) i64(id int16, v int64) { w.field(id, tcI64); w.varint(v) }
func (w *compactWriter) str(id int16, s string) {
	w.field(id, tcBinary)
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// begin opens a struct: a field of one (id > 0) or a list's element (id 0).
func (w *compactWriter) begin(id int16) {
	if id > 0 {
		w.field(id, tcStruct)
	}
	w.last = append(w.last, 0)
}

func (w *compactWriter) end() { w.b = append(w.b, tcStop); w.last = w.last[:len(w.last)-1] }

// list writes a list field's header of n elements of type t.
func (w *compactWriter) list(id int16, t byte, n int) {
	w.field(id, tcList)
	if n < 15 {
		w.b = append(w.b, byte(n)<<4|t)
	} else {
		w.b = append(w.b, 0xf0|t)
		w.uvarint(uint64(n))
	}
}

// crcColumn is a column of a handwritten file: its name, Parquet type (INT64 2, BYTE_ARRAY 6)
// and the PLAIN bytes of each of its values.
type crcColumn struct {
	name  string
	ptype int32
	value func(i int) []byte
}

// crcPage is where a page's body is in a handwritten file.
type crcPage struct {
	column   string
	off, len int
}

// writeCRCParquet writes rows rows of cols as one row group, perPage values a data page, each
// page's header with its CRC if withCRC. It returns the file's bytes and its pages.
func writeCRCParquet(cols []crcColumn, rows, perPage int, withCRC bool) ([]byte, []crcPage) {
	file := []byte("PAR1")
	var pages []crcPage
	type chunk struct{ start, size, values int }
	var chunks []chunk
	for _, c := range cols {
		start := len(file)
		for lo := 0; lo < rows; lo += perPage {
			var body []byte
			for i := lo; i < min(rows, lo+perPage); i++ {
				body = append(body, c.value(i)...)
			}
			h := &compactWriter{}
			h.begin(0)
			h.i32(1, 0) // DATA_PAGE
			h.i32(2, int32(len(body)))
			h.i32(3, int32(len(body)))
			if withCRC {
				h.i32(4, int32(crc32.ChecksumIEEE(body)))
			}
			h.begin(5)
			h.i32(1, int32(min(rows, lo+perPage)-lo))
			h.i32(2, 0) // PLAIN
			h.i32(3, 3) // RLE (no levels: the column is required)
			h.i32(4, 3)
			h.end()
			h.end()
			file = append(file, h.b...)
			pages = append(pages, crcPage{column: c.name, off: len(file), len: len(body)})
			file = append(file, body...)
		}
		chunks = append(chunks, chunk{start, len(file) - start, rows})
	}
	m := &compactWriter{}
	m.begin(0)
	m.i32(1, 1)
	m.list(2, tcStruct, len(cols)+1)
	m.begin(0)
	m.str(4, "schema")
	m.i32(5, int32(len(cols)))
	m.end()
	for _, c := range cols {
		m.begin(0)
		m.i32(1, c.ptype)
		m.i32(3, 0) // REQUIRED
		m.str(4, c.name)
		m.end()
	}
	m.i64(3, int64(rows))
	m.list(4, tcStruct, 1)
	m.begin(0)
	m.list(1, tcStruct, len(cols))
	total := 0
	for k, c := range cols {
		ch := chunks[k]
		total += ch.size
		m.begin(0)
		m.i64(2, int64(ch.start))
		m.begin(3)
		m.i32(1, c.ptype)
		m.list(2, tcI32, 1)
		m.varint(0) // PLAIN
		m.list(3, tcBinary, 1)
		m.uvarint(uint64(len(c.name)))
		m.b = append(m.b, c.name...)
		m.i32(4, 0) // UNCOMPRESSED
		m.i64(5, int64(ch.values))
		m.i64(6, int64(ch.size))
		m.i64(7, int64(ch.size))
		m.i64(9, int64(ch.start))
		m.end()
		m.end()
	}
	m.i64(2, int64(total))
	m.i64(3, int64(rows))
	m.end()
	m.end()
	file = append(file, m.b...)
	file = binary.LittleEndian.AppendUint32(file, uint32(len(m.b)))
	return append(file, "PAR1"...), pages
}

// crcColumns are a handwritten file's columns: row (int64 i) and name ("name-i").
var crcColumns = []crcColumn{
	{"row", 2, func(i int) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(i)) }},
	{"name", 6, func(i int) []byte {
		s := fmt.Sprintf("name-%d", i)
		return append(binary.LittleEndian.AppendUint32(nil, uint32(len(s))), s...)
	}},
}

// readCRCParquet reads the Parquet file path with pack's reader: its rows, or the error.
func readCRCParquet(t *testing.T, path string) ([][][]byte, error) {
	t.Helper()
	r, err := openParquet([]string{path}, nil, parquetAlloc(t))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var rows [][][]byte
	for {
		vals, err := r.Next()
		if err != nil {
			if err.Error() == "EOF" {
				return rows, nil
			}
			return rows, err
		}
		row := make([][]byte, len(vals))
		for k, v := range vals {
			row[k] = bytes.Clone(v)
		}
		rows = append(rows, row)
	}
}

// TestParquetPageCRC: a file whose pages carry CRCs packs whole; a byte flipped anywhere in
// a page's body (every byte, one at a time) is refused in one line naming the file, the row
// group, the column and the page; without CRCs the same flip packs as a changed value, which
// is what ERRORS.md says pack cannot see.
func TestParquetPageCRC(t *testing.T) {
	const rows, perPage = 40, 20
	dir := t.TempDir()
	whole, pages := writeCRCParquet(crcColumns, rows, perPage, true)
	path := filepath.Join(dir, "crc.parquet")
	require.NoError(t, os.WriteFile(path, whole, 0o644))
	got, err := readCRCParquet(t, path)
	require.NoError(t, err)
	require.Len(t, got, rows)
	for i, row := range got {
		require.Equal(t, binary.LittleEndian.AppendUint64(nil, uint64(i)), row[0])
		require.Equal(t, fmt.Sprintf("name-%d", i), string(row[1]))
	}
	require.Len(t, pages, 4)

	flipped := 0
	for _, p := range pages {
		for off := p.off; off < p.off+p.len; off++ {
			bad := bytes.Clone(whole)
			bad[off] ^= 0xff
			require.NoError(t, os.WriteFile(path, bad, 0o644))
			_, err := readCRCParquet(t, path)
			require.Error(t, err, "byte %d of a page of %s flipped", off, p.column)
			msg := err.Error()
			require.Contains(t, msg, path, "byte %d", off)
			require.Contains(t, msg, "row group 0, column "+p.column, "byte %d", off)
			require.Contains(t, msg, "fails its CRC", "byte %d", off)
			require.NotContains(t, msg, "\n")
			flipped++
		}
	}
	t.Logf("%d flipped bytes in %d pages, each refused", flipped, len(pages))

	// Without CRCs, a flipped value byte packs as another value.
	plain, pages := writeCRCParquet(crcColumns, rows, perPage, false)
	plain[pages[0].off] ^= 0xff
	require.NoError(t, os.WriteFile(path, plain, 0o644))
	got, err = readCRCParquet(t, path)
	require.NoError(t, err)
	assert.Equal(t, binary.LittleEndian.AppendUint64(nil, 0xff), got[0][0], "row 0 read as 255")
}

// parsePageHeader reads any bytes without panicking or reading past them: a header of random
// bytes, a real one cut short anywhere, or with a byte flipped.
func TestParquetPageHeaderParse(t *testing.T) {
	whole, pages := writeCRCParquet(crcColumns, 40, 20, true)
	header := whole[4:pages[0].off]
	h, err := parsePageHeader(header)
	require.NoError(t, err)
	require.Equal(t, len(header), h.size)
	require.EqualValues(t, pages[0].len, h.compressed)
	require.True(t, h.hasCRC)
	for n := range len(header) {
		_, err := parsePageHeader(header[:n])
		require.Error(t, err, "cut at %d", n)
	}
	for off := range header {
		bad := bytes.Clone(header)
		bad[off] ^= 0xff
		if h, err := parsePageHeader(bad); err == nil {
			require.LessOrEqual(t, h.size, len(bad))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(64))
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		if h, err := parsePageHeader(b); err == nil {
			require.LessOrEqual(t, h.size, len(b))
		}
	}
}
