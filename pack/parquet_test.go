//go:build tables

package pack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The files under test/testdata/parquet were written by DuckDB (Parquet) and Arrow's
// JavaScript implementation (Arrow IPC) from formulas of the row number i, by make.js there;
// these tests recompute every value of every row from the same formulas.

const tableTestdata = "../test/testdata/parquet"

func testTable(name string) string { return filepath.Join(tableTestdata, name) }

// le is v's little-endian bytes.
func le(v any) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		panic(err)
	}
	return b
}

// The formulas of make.js's types table (typesSQL), a field's value of row i.
var typesFormulas = map[string]func(i int64) []byte{
	"row": func(i int64) []byte { return le(i) },
	"i8":  func(i int64) []byte { return le(int8(i%256 - 128)) },
	"u8":  func(i int64) []byte { return le(uint8(i % 256)) },
	"i16": func(i int64) []byte { return le(int16(i*37%65536 - 32768)) },
	"u16": func(i int64) []byte { return le(uint16(i * 37 % 65536)) },
	"i32": func(i int64) []byte { return le(int32(i*7919%20001 - 10000)) },
	"u32": func(i int64) []byte {
		if i >= 5000 {
			return le(uint32(i*2654435761%2147483648 + 2147483648))
		}
		return le(uint32(i * 2654435761 % 2147483648))
	},
	"i64": func(i int64) []byte { return le(i*1000000007 - 5000000000) },
	"u64": func(i int64) []byte { return le(uint64(math.MaxUint64) - uint64(i)) },
	"f32": func(i int64) []byte { return le(float32(float64(i)*0.25 - 100)) },
	"f64": func(i int64) []byte { return le(float64(i)/8 - 1000) },
	"flag": func(i int64) []byte {
		if i%3 == 0 {
			return []byte{1}
		}
		return []byte{0}
	},
	"name": func(i int64) []byte {
		return []byte("name-" + strconv.FormatInt(i, 10) + strings.Repeat("é", int(i%4)))
	},
	"data": func(i int64) []byte {
		if i%100 == 0 {
			return []byte{}
		}
		return append([]byte{byte(i >> 8), byte(i)}, bytes.Repeat([]byte("z"), int(i%5))...)
	},
	"vec": func(i int64) []byte { return le([]float32{float32(i), float32(i) + 0.5, float32(-i)}) }, // -0 is 0
	"toks": func(i int64) []byte {
		var v []int32
		for x := int64(0); x < i%6; x++ {
			v = append(v, int32(i*10+x))
		}
		return le(v)
	},
	"img.bytes": func(i int64) []byte { return []byte("img" + strconv.FormatInt(i, 10)) },
	"img.path":  func(i int64) []byte { return []byte("img/" + strconv.FormatInt(i, 10) + ".png") },
	"ts":        func(i int64) []byte { return le(1577836800000000 + i*1000001) }, // µs
	"day":       func(i int64) []byte { return le(int32(18262 + i)) },             // 2020-01-01 + i
}

// typesFields are the fields of types.parquet, as "name kind dtype shape size".
var typesFields = []string{
	"row fixed <i8 [] 8", "i8 fixed |i1 [] 1", "u8 fixed |u1 [] 1", "i16 fixed <i2 [] 2",
	"u16 fixed <u2 [] 2", "i32 fixed <i4 [] 4", "u32 fixed <u4 [] 4", "i64 fixed <i8 [] 8",
	"u64 fixed <u8 [] 8", "f32 fixed <f4 [] 4", "f64 fixed <f8 [] 8", "flag fixed |b1 [] 1",
	"name variable  [] 0", "data variable  [] 0",
	"vec fixed <f4 [3] 12", // DuckDB's FLOAT[3], a Parquet list whose every value has 3 elements
	"toks variable <i4 [] 0", "img.bytes variable  [] 0", "img.path variable  [] 0",
	"ts fixed <i8 [] 8", "day fixed <i4 [] 4",
}

func describeFields(fields []FieldSpec) []string {
	var out []string
	for _, f := range fields {
		out = append(out, fmt.Sprintf("%s %s %s %v %d", f.Name, f.Kind, f.DType, f.Shape, f.RecordSize))
	}
	return out
}

// readTable reads r to its end, copying the values, and checks that Progress ends at its
// total and never goes back.
func readTable(t *testing.T, r SampleReader) [][][]byte {
	t.Helper()
	var out [][][]byte
	var last int64
	for {
		vals, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Len(t, vals, len(r.Fields()))
		row := make([][]byte, len(vals))
		for k, v := range vals {
			row[k] = bytes.Clone(v)
		}
		out = append(out, row)
		done, total := r.Progress()
		require.GreaterOrEqual(t, done, last, "progress goes forward")
		require.LessOrEqual(t, done, total)
		last = done
	}
	done, total := r.Progress()
	assert.Equal(t, total, done, "progress ends at the total")
	_, err := r.Next()
	assert.Equal(t, io.EOF, err, "io.EOF again after the end")
	return out
}

// checkRows checks every value of rows (the fields' values, from row first on) against
// formulas.
func checkRows(t *testing.T, fields []FieldSpec, rows [][][]byte, first int64, formulas map[string]func(int64) []byte) {
	t.Helper()
	for n, row := range rows {
		i := first + int64(n)
		for k, f := range fields {
			want := formulas[f.Name](i)
			if !bytes.Equal(want, row[k]) {
				t.Fatalf("row %d, field %s: got %x, want %x", i, f.Name, row[k], want)
			}
			if f.Kind == FixedField {
				require.Len(t, row[k], int(f.RecordSize))
			}
		}
	}
}

// checkedAlloc is an allocator that tests check every Arrow buffer is released with.
func checkedAlloc(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// parquetAlloc is checkedAlloc less strict: arrow-go's delta decoder (v18.8.0,
// deltaBitPackDecoder.initBlock) never releases its 64-byte buffer of bit widths, which the
// garbage collector frees all the same. Anything more is a buffer pack failed to release.
func parquetAlloc(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() {
		assert.LessOrEqual(t, mem.CurrentAlloc(), 64<<10, "Arrow buffers left unreleased")
	})
	return mem
}

func TestParquetTypes(t *testing.T) {
	r, err := openParquet([]string{testTable("types.parquet")}, nil, parquetAlloc(t))
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, typesFields, describeFields(r.Fields()))
	rows := readTable(t, r)
	require.Len(t, rows, 5000) // 3 row groups
	checkRows(t, r.Fields(), rows, 0, typesFormulas)
	require.NoError(t, r.Close())
}

func TestParquetFilesAndColumns(t *testing.T) {
	both := []string{testTable("types.parquet"), testTable("types2.parquet")}
	for _, c := range []struct {
		columns []string
		fields  []string
	}{
		{nil, nil},
		{[]string{"img", "row", "toks"}, []string{"img.bytes", "img.path", "row", "toks"}},
		{[]string{"img.path", "flag"}, []string{"img.path", "flag"}},
	} {
		t.Run(strings.Join(c.columns, ","), func(t *testing.T) {
			r, err := openParquet(both, c.columns, parquetAlloc(t))
			require.NoError(t, err)
			defer r.Close()
			if c.fields != nil {
				var names []string
				for _, f := range r.Fields() {
					names = append(names, f.Name)
				}
				assert.Equal(t, c.fields, names)
			}
			rows := readTable(t, r)
			require.Len(t, rows, 5700) // types2.parquet's rows follow types.parquet's
			checkRows(t, r.Fields(), rows, 0, typesFormulas)
		})
	}
}

// readErr opens with open and reads to the end, returning the first error.
func readErr(open func() (SampleReader, error)) error {
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		if _, err := r.Next(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func TestParquetRefusals(t *testing.T) {
	dir := t.TempDir()
	whole, err := os.ReadFile(testTable("types.parquet"))
	require.NoError(t, err)
	truncated := filepath.Join(dir, "truncated.parquet")
	require.NoError(t, os.WriteFile(truncated, whole[:len(whole)/2], 0o644))
	// The footer intact, the pages garbage.
	garbled := bytes.Clone(whole)
	for i := 200; i < len(garbled)/2; i++ {
		garbled[i] = byte(i * 7)
	}
	corrupt := filepath.Join(dir, "corrupt.parquet")
	require.NoError(t, os.WriteFile(corrupt, garbled, 0o644))
	text := filepath.Join(dir, "text.parquet")
	require.NoError(t, os.WriteFile(text, []byte("not parquet at all\n"), 0o644))
	empty := filepath.Join(dir, "empty.parquet") // no row group
	f, err := os.Create(empty)
	require.NoError(t, err)
	w, err := pqarrow.NewFileWriter(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil),
		f, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	require.NoError(t, err)
	require.NoError(t, w.Close())

	for _, c := range []struct {
		name    string
		paths   []string
		columns []string
		want    string // "" for none
	}{
		{"null int", []string{"nulls.parquet"}, []string{"a"}, "nulls.parquet: column a has a null at row 42; fill it or leave the column out with --columns"},
		{"null string", []string{"nulls.parquet"}, []string{"ok", "s"}, "column s has a null at row 7;"},
		{"null struct", []string{"nulls.parquet"}, []string{"img"}, "column img.bytes has a null at row 3;"},
		{"null in list", []string{"nulls.parquet"}, []string{"toks"}, "column toks has a null inside its value at row 5;"},
		{"no null", []string{"nulls.parquet"}, []string{"ok"}, ""},
		{"map", []string{"unsupported.parquet"}, nil, "column m is map<utf8, int32, items_nullable>, which a field cannot hold"},
		{"decimal", []string{"unsupported.parquet"}, []string{"ok", "d"}, "column d is decimal(10, 2), which a field cannot hold (numbers, bools, dates and times, strings, binary, and fixed-size or variable lists of numbers can); leave it out with --columns"},
		{"list of strings", []string{"unsupported.parquet"}, []string{"tags"}, "column tags is list<element: utf8, nullable>"},
		{"supported left", []string{"unsupported.parquet"}, []string{"ok"}, ""},
		{"ids", []string{"ids.parquet"}, nil, `ids.parquet: field name "ids" is a sidecar's (epoch-NNNN.ids): rename the field in the input (a Parquet column, a tar member's extension); or leave the column out with --columns`},
		{"ids left out", []string{"ids.parquet"}, []string{"x"}, ""},
		{"twice", []string{"types.parquet"}, []string{"row", "row"}, "--columns chooses column row twice"},
		{"twice in a struct", []string{"types.parquet"}, []string{"img.path", "img"}, "--columns chooses column img.path twice"},
		{"a column near one", []string{"types.parquet"}, []string{"row", "nme"}, `types.parquet has no column "nme" (did you mean "name"?); its columns are row,`},
		{"unknown column", []string{"types.parquet"}, []string{"row", "nope"}, `types.parquet has no column "nope"; its columns are row, i8, u8, i16, u16, i32, u32, i64, u64, f32, f64, flag, name, data, vec, toks, img (img.bytes, img.path), ts, day`},
		{"mismatch", []string{"types.parquet", "mismatch.parquet"}, nil, "column i32 is int64 in " + testTable("mismatch.parquet") + " but int32 in " + testTable("types.parquet") + ": the files of an input must have the same schema"},
		{"mismatch left out", []string{"types.parquet", "mismatch.parquet"}, []string{"row", "img"}, ""},
		{"other columns", []string{"types.parquet", "ids.parquet"}, nil, "column 1 of " + testTable("ids.parquet") + " is ids, where " + testTable("types.parquet") + " has row"},
		{"missing column", []string{"types.parquet", "ids.parquet"}, []string{"row"}, testTable("ids.parquet") + " has no column row, which " + testTable("types.parquet") + " has"},
		{"missing file", []string{"types.parquet", "absent.parquet"}, nil, "cannot read the input: stat " + testTable("absent.parquet") + ": no such file or directory"},
		{"no files", nil, nil, "no Parquet files to read"},
		{"truncated", []string{truncated}, nil, truncated + " is truncated (it does not end with PAR1, as a whole Parquet file does)"},
		{"corrupt", []string{corrupt}, nil, corrupt},
		// Known limits of arrow-go's decoder, of files DuckDB writes with PARQUET_VERSION V2.
		{"33-bit deltas", []string{"delta33.parquet"}, []string{"u32"}, "delta33.parquet after row 0: parquet: delta bit width 33 exceeds decoder width 32"},
		{"first delta", []string{"delta33.parquet"}, []string{"big"}, "delta33.parquet after row 0: parquet: initial delta value 4000000000 exceeds INT32 range"},
		{"not parquet", []string{text}, nil, text + " is not a Parquet file (it does not start with PAR1)"},
		{"empty", []string{empty, "types.parquet"}, []string{"x"}, testTable("types.parquet") + ` has no column x, which ` + empty + " has"},
		{"empty alone", []string{empty}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var paths []string
			for _, p := range c.paths {
				if !filepath.IsAbs(p) {
					p = testTable(p)
				}
				paths = append(paths, p)
			}
			err := readErr(func() (SampleReader, error) { return openParquet(paths, c.columns, parquetAlloc(t)) })
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			t.Log(err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// TestParquetArrowSchema reads what only a Parquet file with Arrow's schema in its metadata
// holds (arrow-go and pyarrow write it): fixed-size lists, large strings and lists, float16,
// fixed-size binary, dictionaries, and the rest of the temporal types.
func TestParquetArrowSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "arrowgo.parquet")
	f, err := os.Create(path)
	require.NoError(t, err)
	var w *pqarrow.FileWriter
	// A row group a record: pqarrow (v18.8.0) writes the first rows' values again for a
	// fixed-size list when it splits a record into row groups itself.
	for lo := 0; lo < 3000; lo += 700 {
		all := arrowGoRecord(t, lo, min(lo+700, 3000))
		// Parquet has no duration (pqarrow refuses to write it).
		idx := all.Schema().FieldIndices("dur")[0]
		fields := slices.Delete(slices.Clone(all.Schema().Fields()), idx, idx+1)
		cols := slices.Delete(slices.Clone(all.Columns()), idx, idx+1)
		rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, all.NumRows())
		if w == nil {
			w, err = pqarrow.NewFileWriter(rec.Schema(), f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(700)),
				pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
			require.NoError(t, err)
		}
		require.NoError(t, w.Write(rec))
		rec.Release()
		all.Release()
	}
	require.NoError(t, w.Close())
	pf, err := file.OpenParquetFile(path, false)
	require.NoError(t, err)
	require.Equal(t, 5, pf.NumRowGroups())
	require.NoError(t, pf.Close())

	r, err := openParquet([]string{path}, nil, parquetAlloc(t))
	require.NoError(t, err)
	defer r.Close()
	// Parquet's dates are days: a date64 comes back a date32.
	want := slices.DeleteFunc(slices.Clone(arrowGoFields), func(s string) bool { return strings.HasPrefix(s, "dur ") })
	want[slices.Index(want, "d64 fixed <i8 [] 8")] = "d64 fixed <i4 [] 4"
	assert.Equal(t, want, describeFields(r.Fields()))
	rows := readTable(t, r)
	require.Len(t, rows, 3000)
	formulas := maps.Clone(arrowGoFormulas)
	formulas["d64"] = func(i int64) []byte { return le(int32(i)) }
	checkRows(t, r.Fields(), rows, 0, formulas)
}

// peakAllocator is an allocator that keeps its peak of bytes allocated.
type peakAllocator struct {
	*memory.CheckedAllocator
	peak int
}

func (p *peakAllocator) Allocate(n int) []byte {
	b := p.CheckedAllocator.Allocate(n)
	p.peak = max(p.peak, p.CurrentAlloc())
	return b
}

func (p *peakAllocator) Reallocate(n int, b []byte) []byte {
	b = p.CheckedAllocator.Reallocate(n, b)
	p.peak = max(p.peak, p.CurrentAlloc())
	return b
}

// TestParquetMemoryBounded reads a 48 MiB Parquet file of one row group of 128 KiB values and
// checks that Arrow's buffers never held more than a few batches' bytes (parquetBatchBytes).
func TestParquetMemoryBounded(t *testing.T) {
	const rows, size = 384, 128 << 10
	mem := memory.NewGoAllocator()
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	value := make([]byte, size)
	for i := 0; i < rows; i++ {
		binary.LittleEndian.PutUint64(value, uint64(i))
		b.Append(value)
	}
	col := b.NewArray()
	b.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "image", Type: arrow.BinaryTypes.Binary}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, rows)
	col.Release()
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "big.parquet")
	f, err := os.Create(path)
	require.NoError(t, err)
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Uncompressed), parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(rows), parquet.WithBatchSize(8)), pqarrow.DefaultWriterProps())
	require.NoError(t, err)
	require.NoError(t, w.Write(rec))
	require.NoError(t, w.Close())
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(rows*size))

	peak := &peakAllocator{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
	r, err := openParquet([]string{path}, nil, peak)
	require.NoError(t, err)
	n := 0
	for {
		vals, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Len(t, vals[0], size)
		require.Equal(t, uint64(n), binary.LittleEndian.Uint64(vals[0]))
		if n++; n == rows/2 {
			done, total := r.Progress()
			assert.InDelta(t, 0.5, float64(done)/float64(total), 0.25, "progress midway: %d of %d", done, total)
		}
	}
	require.NoError(t, r.Close())
	assert.Equal(t, rows, n)
	t.Logf("Arrow's buffers peaked at %d MiB reading %d MiB", peak.peak>>20, st.Size()>>20)
	assert.Less(t, peak.peak, 4*parquetBatchBytes, "memory is bounded by the batch, not the row group")
}
