//go:build tables

package pack

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The formulas of make.js's Arrow table (arrowBatch), a field's value of row i.
var arrowFormulas = map[string]func(i int64) []byte{
	"row":  typesFormulas["row"],
	"i32":  typesFormulas["i32"],
	"f16":  func(i int64) []byte { return le(float16.New(float32(i%1000)/2 - 200).Uint16()) },
	"f64":  typesFormulas["f64"],
	"flag": typesFormulas["flag"],
	"name": typesFormulas["name"],
	"lname": func(i int64) []byte {
		return []byte("large-" + strconv.FormatInt(i, 10))
	},
	"data": func(i int64) []byte {
		v := []byte{}
		for k := int64(0); k < i%7; k++ {
			v = append(v, byte(i+k))
		}
		return v
	},
	"vec": func(i int64) []byte { return le([]float32{float32(i), float32(i) + 0.5, -float32(i)}) }, // -0 for 0, as JavaScript's
	"grid": func(i int64) []byte {
		return le([]int16{int16(i % 100), 1, 2, -int16(i % 100), int16(i % 7), int16(i % 11)})
	},
	"toks":      typesFormulas["toks"],
	"img.bytes": typesFormulas["img.bytes"],
	"img.path":  typesFormulas["img.path"],
	"ts":        typesFormulas["ts"],
	"label":     func(i int64) []byte { return []byte([]string{"cat", "dog", "bird"}[i%3]) },
}

var arrowFields = []string{
	"row fixed <i8 [] 8", "i32 fixed <i4 [] 4", "f16 fixed <f2 [] 2", "f64 fixed <f8 [] 8",
	"flag fixed |b1 [] 1", "name variable  [] 0", "lname variable  [] 0", "data variable  [] 0",
	"vec fixed <f4 [3] 12", "grid fixed <i2 [3 2] 12", "toks variable <i4 [] 0",
	"img.bytes variable  [] 0", "img.path variable  [] 0", "ts fixed <i8 [] 8", "label variable  [] 0",
}

func TestArrowTypes(t *testing.T) {
	for _, c := range []struct {
		name  string
		paths []string
	}{
		{"file", []string{"types.arrow"}},
		{"stream", []string{"types.stream.arrow"}}, // as Hugging Face's cache
		{"both", []string{"types.arrow", "types.stream.arrow"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var paths []string
			for _, p := range c.paths {
				paths = append(paths, testTable(p))
			}
			r, err := openArrow(paths, nil, checkedAlloc(t))
			require.NoError(t, err)
			defer r.Close()
			assert.Equal(t, arrowFields, describeFields(r.Fields()))
			rows := readTable(t, r)
			require.Len(t, rows, 500*len(paths))
			for k := range paths {
				checkRows(t, r.Fields(), rows[500*k:500*(k+1)], 0, arrowFormulas)
			}
		})
	}
	t.Run("columns", func(t *testing.T) {
		r, err := openArrow([]string{testTable("types.stream.arrow")}, []string{"label", "img.bytes", "grid"}, checkedAlloc(t))
		require.NoError(t, err)
		defer r.Close()
		assert.Equal(t, []string{"label variable  [] 0", "img.bytes variable  [] 0", "grid fixed <i2 [3 2] 12"}, describeFields(r.Fields()))
		rows := readTable(t, r)
		require.Len(t, rows, 500)
		checkRows(t, r.Fields(), rows, 0, arrowFormulas)
	})
}

func TestArrowRefusals(t *testing.T) {
	dir := t.TempDir()
	var truncated []string
	for _, name := range []string{"types.arrow", "types.stream.arrow"} {
		whole, err := os.ReadFile(testTable(name))
		require.NoError(t, err)
		p := filepath.Join(dir, "truncated-"+name)
		require.NoError(t, os.WriteFile(p, whole[:len(whole)*2/3], 0o644))
		truncated = append(truncated, p)
	}
	feather1 := filepath.Join(dir, "old.feather")
	require.NoError(t, os.WriteFile(feather1, []byte("FEA1\x00\x00\x00\x00junk"), 0o644))
	text := filepath.Join(dir, "text.arrow")
	require.NoError(t, os.WriteFile(text, []byte("not arrow at all, though long enough\n"), 0o644))

	for _, c := range []struct {
		name    string
		paths   []string
		columns []string
		want    string
	}{
		{"null", []string{"nulls.arrow"}, nil, "nulls.arrow: column a has a null at row 5; fill it or leave the column out with --columns"},
		{"no null", []string{"nulls.arrow"}, []string{"ok"}, ""},
		{"list of strings", []string{"unsupported.arrow"}, nil, "column tags is list<item: utf8>, which a field cannot hold"},
		{"supported left", []string{"unsupported.arrow"}, []string{"ok"}, ""},
		{"unknown column", []string{"nulls.arrow"}, []string{"b"}, `has no column "b"; its columns are ok, a`},
		{"other schema", []string{"types.arrow", "nulls.arrow"}, []string{"row"}, "has no column row, which"},
		{"truncated file", truncated[:1], nil, truncated[0] + " is not a readable Arrow IPC file"},
		{"truncated stream", truncated[1:], nil, "cannot read " + truncated[1] + " after row"},
		{"feather 1", []string{feather1}, nil, "is a Feather version 1 file, which pack does not read"},
		{"not arrow", []string{text}, nil, text + " is neither an Arrow IPC file (it does not start with ARROW1) nor a readable Arrow IPC stream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var paths []string
			for _, p := range c.paths {
				if !filepath.IsAbs(p) {
					p = testTable(p)
				}
				paths = append(paths, p)
			}
			err := readErr(func() (SampleReader, error) { return openArrow(paths, c.columns, checkedAlloc(t)) })
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

// arrowGoRecord is a record of rows [lo, hi) of the types the independent writers' files
// lack, written with arrow-go's builders.
func arrowGoRecord(t *testing.T, lo, hi int) arrow.RecordBatch {
	mem := memory.NewGoAllocator()
	nested := arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.StructOf(arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Int32})},
		arrow.Field{Name: "c", Type: arrow.BinaryTypes.String})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "half", Type: arrow.FixedWidthTypes.Float16},
		{Name: "vec", Type: arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32)},
		{Name: "grid", Type: arrow.FixedSizeListOf(3, arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int16))},
		{Name: "bits", Type: arrow.FixedSizeListOf(4, arrow.FixedWidthTypes.Boolean)},
		{Name: "uuid", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}},
		{Name: "lstr", Type: arrow.BinaryTypes.LargeString},
		{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary},
		{Name: "llist", Type: arrow.LargeListOf(arrow.PrimitiveTypes.Int64)},
		{Name: "blist", Type: arrow.ListOf(arrow.FixedWidthTypes.Boolean)},
		{Name: "label", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64},
		{Name: "t32", Type: arrow.FixedWidthTypes.Time32ms},
		{Name: "t64", Type: arrow.FixedWidthTypes.Time64ns},
		{Name: "dur", Type: arrow.FixedWidthTypes.Duration_s},
		{Name: "tstz", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "Europe/Paris"}},
		{Name: "nested", Type: nested},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := lo; i < hi; i++ {
		i64 := int64(i)
		b.Field(0).(*array.Uint64Builder).Append(uint64(i) * 0x9E3779B97F4A7C15)
		b.Field(1).(*array.Float16Builder).Append(float16.New(float32(i%1000)/2 - 200))
		vec := b.Field(2).(*array.FixedSizeListBuilder)
		vec.Append(true)
		vec.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{float32(i), float32(i) + 0.5, -float32(i)}, nil)
		grid := b.Field(3).(*array.FixedSizeListBuilder)
		grid.Append(true)
		rows := grid.ValueBuilder().(*array.FixedSizeListBuilder)
		for r := 0; r < 3; r++ {
			rows.Append(true)
			rows.ValueBuilder().(*array.Int16Builder).AppendValues([]int16{int16(i + r), int16(-r)}, nil)
		}
		bits := b.Field(4).(*array.FixedSizeListBuilder)
		bits.Append(true)
		for k := 0; k < 4; k++ {
			bits.ValueBuilder().(*array.BooleanBuilder).Append(i>>k&1 == 1)
		}
		uuid := make([]byte, 16)
		for k := range uuid {
			uuid[k] = byte(i + k)
		}
		b.Field(5).(*array.FixedSizeBinaryBuilder).Append(uuid)
		b.Field(6).(*array.LargeStringBuilder).Append("L" + strconv.Itoa(i))
		b.Field(7).(*array.BinaryBuilder).Append(bytes.Repeat([]byte{byte(i)}, i%5))
		llist := b.Field(8).(*array.LargeListBuilder)
		llist.Append(true)
		llist.ValueBuilder().(*array.Int64Builder).AppendValues([]int64{i64, -i64}[:i%3], nil)
		blist := b.Field(9).(*array.ListBuilder)
		blist.Append(true)
		for x := 0; x < i%4; x++ {
			blist.ValueBuilder().(*array.BooleanBuilder).Append(x%2 == 0)
		}
		require.NoError(t, b.Field(10).(*array.BinaryDictionaryBuilder).AppendString([]string{"cat", "dog", "bird"}[i%3]))
		b.Field(11).(*array.Date64Builder).Append(arrow.Date64(i64 * 86400000))
		b.Field(12).(*array.Time32Builder).Append(arrow.Time32(i * 1000 % 86400000))
		b.Field(13).(*array.Time64Builder).Append(arrow.Time64(i64 * 1000000))
		b.Field(14).(*array.DurationBuilder).Append(arrow.Duration(i64 - 100))
		b.Field(15).(*array.TimestampBuilder).Append(arrow.Timestamp(1600000000000 + i64))
		st := b.Field(16).(*array.StructBuilder)
		st.Append(true)
		a := st.FieldBuilder(0).(*array.StructBuilder)
		a.Append(true)
		a.FieldBuilder(0).(*array.Int32Builder).Append(int32(-i))
		st.FieldBuilder(1).(*array.StringBuilder).Append("c" + strconv.Itoa(i))
	}
	return b.NewRecordBatch()
}

var arrowGoFields = []string{
	"u64 fixed <u8 [] 8", "half fixed <f2 [] 2", "vec fixed <f4 [3] 12", "grid fixed <i2 [3 2] 12",
	"bits fixed |b1 [4] 4", "uuid fixed |u1 [16] 16", "lstr variable  [] 0", "lbin variable  [] 0",
	"llist variable <i8 [] 0", "blist variable |b1 [] 0", "label variable  [] 0",
	"d64 fixed <i8 [] 8", "t32 fixed <i4 [] 4", "t64 fixed <i8 [] 8", "dur fixed <i8 [] 8",
	"tstz fixed <i8 [] 8", "nested.a.b fixed <i4 [] 4", "nested.c variable  [] 0",
}

var arrowGoFormulas = map[string]func(i int64) []byte{
	"u64":  func(i int64) []byte { return le(uint64(i) * 0x9E3779B97F4A7C15) },
	"half": arrowFormulas["f16"],
	"vec":  arrowFormulas["vec"],
	"grid": func(i int64) []byte { return le([]int16{int16(i), 0, int16(i + 1), -1, int16(i + 2), -2}) },
	"bits": func(i int64) []byte { return []byte{byte(i & 1), byte(i >> 1 & 1), byte(i >> 2 & 1), byte(i >> 3 & 1)} },
	"uuid": func(i int64) []byte {
		v := make([]byte, 16)
		for k := range v {
			v[k] = byte(i + int64(k))
		}
		return v
	},
	"lstr":       func(i int64) []byte { return []byte("L" + strconv.FormatInt(i, 10)) },
	"lbin":       func(i int64) []byte { return bytes.Repeat([]byte{byte(i)}, int(i%5)) },
	"llist":      func(i int64) []byte { return le([]int64{i, -i}[:i%3]) },
	"blist":      func(i int64) []byte { return []byte{1, 0, 1}[:i%4] },
	"label":      arrowFormulas["label"],
	"d64":        func(i int64) []byte { return le(i * 86400000) },
	"t32":        func(i int64) []byte { return le(int32(i * 1000 % 86400000)) },
	"t64":        func(i int64) []byte { return le(i * 1000000) },
	"dur":        func(i int64) []byte { return le(i - 100) },
	"tstz":       func(i int64) []byte { return le(1600000000000 + i) },
	"nested.a.b": func(i int64) []byte { return le(int32(-i)) },
	"nested.c":   func(i int64) []byte { return []byte("c" + strconv.FormatInt(i, 10)) },
	"sv": func(i int64) []byte {
		return []byte("view-" + strings.Repeat("v", int(i%20)) + strconv.FormatInt(i, 10))
	},
	"bv": func(i int64) []byte { return bytes.Repeat([]byte{byte(i), 0}, int(i%9)) },
}

// withViews adds to rec the view columns (string_view, binary_view) that Polars writes.
func withViews(rec arrow.RecordBatch) arrow.RecordBatch {
	mem := memory.NewGoAllocator()
	sv := array.NewStringViewBuilder(mem)
	bv := array.NewBinaryViewBuilder(mem)
	for i := int64(0); i < rec.NumRows(); i++ { // the rows of arrowGoRecord(t, 0, n)
		sv.Append(string(arrowGoFormulas["sv"](i)))
		bv.Append(arrowGoFormulas["bv"](i))
	}
	svArr, bvArr := sv.NewArray(), bv.NewArray()
	defer svArr.Release()
	defer bvArr.Release()
	fields := append(rec.Schema().Fields(), arrow.Field{Name: "sv", Type: arrow.BinaryTypes.StringView},
		arrow.Field{Name: "bv", Type: arrow.BinaryTypes.BinaryView})
	cols := append(append([]arrow.Array{}, rec.Columns()...), svArr, bvArr)
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// TestArrowGoIPC reads arrow-go's own IPC file and stream of the types the JavaScript
// writer's files lack, views included, written as slices of one record (several batches).
func TestArrowGoIPC(t *testing.T) {
	base := arrowGoRecord(t, 0, 2000)
	rec := withViews(base)
	base.Release()
	defer rec.Release()
	dir := t.TempDir()
	write := func(name string, newWriter func(io.Writer) (interface {
		Write(arrow.RecordBatch) error
		Close() error
	}, error)) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		require.NoError(t, err)
		w, err := newWriter(f)
		require.NoError(t, err)
		for lo := int64(0); lo < rec.NumRows(); lo += 300 {
			s := rec.NewSlice(lo, min(lo+300, rec.NumRows()))
			require.NoError(t, w.Write(s))
			s.Release()
		}
		require.NoError(t, w.Close())
		require.NoError(t, f.Close())
		return p
	}
	file := write("go.arrow", func(w io.Writer) (interface {
		Write(arrow.RecordBatch) error
		Close() error
	}, error) {
		return ipc.NewFileWriter(w, ipc.WithSchema(rec.Schema()))
	})
	stream := write("go.stream", func(w io.Writer) (interface {
		Write(arrow.RecordBatch) error
		Close() error
	}, error) {
		return ipc.NewWriter(w, ipc.WithSchema(rec.Schema())), nil
	})
	want := append(append([]string{}, arrowGoFields...), "sv variable  [] 0", "bv variable  [] 0")
	for _, p := range []string{file, stream} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			r, err := openArrow([]string{p}, nil, checkedAlloc(t))
			require.NoError(t, err)
			defer r.Close()
			assert.Equal(t, want, describeFields(r.Fields()))
			rows := readTable(t, r)
			require.Len(t, rows, 2000)
			checkRows(t, r.Fields(), rows, 0, arrowGoFormulas)
		})
	}
}

// TestArrowSlicedBatch binds columns to a slice of a record, whose arrays start at an offset
// into their buffers (as a batch of a larger read may), and checks every value.
func TestArrowSlicedBatch(t *testing.T) {
	base := arrowGoRecord(t, 0, 64)
	rec := withViews(base)
	base.Release()
	defer rec.Release()
	sl := rec.NewSlice(7, 41)
	defer sl.Release()
	cols, err := selectColumns(tableLeaves(sl.Schema()), nil, "sliced")
	require.NoError(t, err)
	for _, c := range cols {
		v, err := bindColumn(sl, c)
		require.NoError(t, err)
		for i := 0; i < int(sl.NumRows()); i++ {
			got, err := v(i)
			require.NoError(t, err)
			want := arrowGoFormulas[c.name()](int64(7 + i))
			require.True(t, bytes.Equal(want, got), "%s row %d: got %x, want %x", c.name(), 7+i, got, want)
		}
	}
}
