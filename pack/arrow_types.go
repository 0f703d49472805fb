//go:build tables

package pack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/blockfs/blockfs/internal/near"
	"github.com/blockfs/blockfs/internal/optname"
)

// Parquet and Arrow columns as fields: how OpenParquet and OpenArrow map a table's columns
// (in Arrow's types, which Parquet's are read as) to FieldSpecs and values. This comment is
// the reference docs/FORMAT.md quotes.
//
// Each leaf of the table is one field: a top-level column that is not a struct, and each
// member of a struct column that is not itself a struct, named "parent.child" (recursively:
// "a.b.c"). Hugging Face's images, struct{bytes: binary, path: string}, become the fields
// "image.bytes" and "image.path". Values are little-endian.
//
//	Arrow type                          kind      DType   Shape       value
//	int8, int16, int32, int64           fixed     |i1 <i2 <i4 <i8     []
//	uint8, uint16, uint32, uint64       fixed     |u1 <u2 <u4 <u8     []
//	float16, float32, float64           fixed     <f2 <f4 <f8         []
//	bool                                fixed     |b1     []          one byte, 0 or 1
//	date32                              fixed     <i4     []          days since 1970-01-01
//	date64                              fixed     <i8     []          ms since 1970-01-01
//	timestamp[unit, tz]                 fixed     <i8     []          units since 1970-01-01 (*)
//	time32[s|ms], time64[us|ns]         fixed     <i4 <i8 []          units since midnight
//	duration[unit]                      fixed     <i8     []          units
//	fixed_size_binary[n]                fixed     |u1     [n]         the n bytes
//	fixed_size_list<T>[n] (nested too)  fixed     T's     [n, m...]   the elements in row-major order
//	binary, large_binary, binary_view   variable  ""      []          the bytes
//	string, large_string, string_view   variable  ""      []          the UTF-8 bytes
//	list<T>, large_list<T>              variable  T's     []          the elements' bytes concatenated
//	dictionary<V>                       as V                          the value the index names
//	an extension type                   as its storage type
//
// where T is one of the types from int8 to duration (bool elements one byte each; views are
// copied, everything else is served from Arrow's buffers as it is).
//
// (*) A timestamp keeps its unit (s, ms, us, ns), which is in the table's schema but not in
// the field, and drops its time zone: with one, the value is a UTC instant; without (a
// "naive" timestamp, DuckDB's TIMESTAMP), the wall clock read as if it were UTC.
//
// Parquet's types are read as arrow-go's pqarrow maps them: INT96 to timestamp[ns], DATE to
// date32 (so a date64 written to Parquet comes back date32), FIXED_LEN_BYTE_ARRAY to
// fixed_size_binary (UUID to fixed_size_binary[16]), a dictionary-encoded column to its
// values. A fixed-size list survives in Parquet only through Arrow's schema in the file's
// metadata (pyarrow and arrow-go write it); without it (DuckDB's FLOAT[3], Spark's arrays)
// it is a list, and comes out variable.
//
// Anything else (maps, unions, decimals, intervals, lists of strings or of structs, a list
// inside a fixed-size list) is refused at open with one line naming the column and its type
// and suggesting --columns to leave it out.
//
// Nulls are refused, wherever they are (a fixed-width value, a string, a list, a struct, an
// element inside a list): a field has no null, and one rule is easier to state than a fill
// value per type. The error names the file, the column and the row within the file; fill the
// nulls in the input, or leave the column out with --columns.

// tableColumn is one leaf of a table chosen as a field.
type tableColumn struct {
	path []string       // the column's name, then the struct members' down to the leaf
	typ  arrow.DataType // the leaf's type in the first file
	spec FieldSpec
	// fixedList: a list column packed as a fixed field (fixLists), its values this many
	// elements each; 0 otherwise.
	fixedList int64
}

// name is the field's name: path dotted.
func (c tableColumn) name() string { return strings.Join(c.path, ".") }

// tableLeaves lists schema's leaves in order, without checking their types.
func tableLeaves(schema *arrow.Schema) []tableColumn {
	var out []tableColumn
	var walk func(path []string, t arrow.DataType)
	walk = func(path []string, t arrow.DataType) {
		if st, ok := t.(*arrow.StructType); ok {
			for _, f := range st.Fields() {
				walk(append(path[:len(path):len(path)], f.Name), f.Type)
			}
			return
		}
		out = append(out, tableColumn{path: path, typ: t})
	}
	for _, f := range schema.Fields() {
		walk([]string{f.Name}, f.Type)
	}
	return out
}

// selectColumns picks from leaves (tableLeaves) those columns names, in its order: a name is a
// top-level column (all its leaves) or a leaf's dotted name. nil names picks every leaf. It
// sets each pick's spec, refusing a type a field cannot hold.
func selectColumns(leaves []tableColumn, names []string, src string) ([]tableColumn, error) {
	picked := leaves
	if len(names) > 0 {
		picked = nil
		for _, n := range names {
			var match []tableColumn
			for _, c := range leaves {
				if c.path[0] == n {
					match = append(match, c)
				}
			}
			if len(match) == 0 {
				for _, c := range leaves {
					if c.name() == n {
						match = append(match, c)
					}
				}
			}
			if len(match) == 0 {
				var names []string
				for _, c := range leaves {
					names = append(names, c.path[0], c.name())
				}
				hint := ""
				if best := near.Best(n, names, 2); best != "" {
					hint = fmt.Sprintf(" (did you mean %q?)", best)
				}
				return nil, fmt.Errorf("%s has no column %q%s; its columns are %s", src, n, hint, columnList(leaves))
			}
			for _, m := range match {
				if slices.ContainsFunc(picked, func(c tableColumn) bool { return c.name() == m.name() }) {
					return nil, fmt.Errorf("%s chooses column %s twice", optname.Flag("columns"), m.name())
				}
			}
			picked = append(picked, match...)
		}
	}
	out := make([]tableColumn, len(picked))
	for i, c := range picked {
		spec, err := fieldSpec(c.name(), c.typ)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		c.spec = spec
		out[i] = c
	}
	return out, nil
}

// columnList names a table's columns for an error: "a, b, img (img.bytes, img.path)".
func columnList(leaves []tableColumn) string {
	var parts []string
	for i := 0; i < len(leaves); {
		j := i + 1
		for j < len(leaves) && leaves[j].path[0] == leaves[i].path[0] {
			j++
		}
		if len(leaves[i].path) == 1 {
			parts = append(parts, leaves[i].path[0])
		} else {
			var sub []string
			for _, c := range leaves[i:j] {
				sub = append(sub, c.name())
			}
			parts = append(parts, fmt.Sprintf("%s (%s)", leaves[i].path[0], strings.Join(sub, ", ")))
		}
		i = j
	}
	return strings.Join(parts, ", ")
}

// scalarDType returns the numpy dtype and the bytes of a fixed-width Arrow type that a field
// holds as it is (bool: one byte a value); ok false for any other type.
func scalarDType(t arrow.DataType) (dtype string, size int, ok bool) {
	switch t.ID() {
	case arrow.INT8:
		return "|i1", 1, true
	case arrow.UINT8:
		return "|u1", 1, true
	case arrow.BOOL:
		return "|b1", 1, true
	case arrow.INT16:
		return "<i2", 2, true
	case arrow.UINT16:
		return "<u2", 2, true
	case arrow.FLOAT16:
		return "<f2", 2, true
	case arrow.INT32, arrow.DATE32, arrow.TIME32:
		return "<i4", 4, true
	case arrow.UINT32:
		return "<u4", 4, true
	case arrow.FLOAT32:
		return "<f4", 4, true
	case arrow.INT64, arrow.DATE64, arrow.TIMESTAMP, arrow.TIME64, arrow.DURATION:
		return "<i8", 8, true
	case arrow.UINT64:
		return "<u8", 8, true
	case arrow.FLOAT64:
		return "<f8", 8, true
	}
	return "", 0, false
}

// storageType is t without its extension wrappers: the type of its data.
func storageType(t arrow.DataType) arrow.DataType {
	for {
		e, ok := t.(arrow.ExtensionType)
		if !ok {
			return t
		}
		t = e.StorageType()
	}
}

// fieldSpec maps a leaf of type t to a field (see the table at the top of this file).
func fieldSpec(name string, t arrow.DataType) (FieldSpec, error) {
	spec := FieldSpec{Name: name}
	st := storageType(t)
	if d, ok := st.(*arrow.DictionaryType); ok {
		st = storageType(d.ValueType)
	}
	if dtype, size, ok := scalarDType(st); ok {
		spec.Kind, spec.DType, spec.RecordSize, spec.Shape = FixedField, dtype, int64(size), []int64{}
		return spec, nil
	}
	switch u := st.(type) {
	case *arrow.FixedSizeBinaryType:
		spec.Kind, spec.DType, spec.RecordSize, spec.Shape = FixedField, "|u1", int64(u.ByteWidth), []int64{int64(u.ByteWidth)}
		return spec, nil
	case *arrow.FixedSizeListType:
		shape := []int64{}
		n := int64(1)
		var elem arrow.DataType = u
		for {
			l, ok := elem.(*arrow.FixedSizeListType)
			if !ok {
				break
			}
			shape = append(shape, int64(l.Len()))
			n *= int64(l.Len())
			elem = storageType(l.Elem())
		}
		if dtype, size, ok := scalarDType(elem); ok {
			spec.Kind, spec.DType, spec.RecordSize, spec.Shape = FixedField, dtype, n*int64(size), shape
			return spec, nil
		}
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.StringType, *arrow.LargeStringType,
		*arrow.BinaryViewType, *arrow.StringViewType:
		spec.Kind, spec.Shape = VariableField, []int64{}
		return spec, nil
	case *arrow.ListType, *arrow.LargeListType:
		if dtype, _, ok := scalarDType(storageType(u.(arrow.ListLikeType).Elem())); ok {
			spec.Kind, spec.DType, spec.Shape = VariableField, dtype, []int64{}
			return spec, nil
		}
	}
	return spec, fmt.Errorf("column %s is %s, which a field cannot hold (numbers, bools, dates and times, strings, binary, and fixed-size or variable lists of numbers can); leave it out with %s", name, t, optname.Flag("columns"))
}

// Errors of a value function: the row is null, or an element inside its value is.
var (
	errNullValue  = errors.New("has a null")
	errNullInside = errors.New("has a null inside its value")
)

// valueFunc returns the value of row i of the batch it was bound to, in the bytes of the
// batch or of a scratch buffer that the next call reuses.
type valueFunc func(i int) ([]byte, error)

// bindColumn returns the value function of column c in batch. The batch's schema must have
// c's path with c's type (checkSameColumns).
func bindColumn(batch arrow.RecordBatch, c tableColumn) (valueFunc, error) {
	idx := batch.Schema().FieldIndices(c.path[0])
	if len(idx) == 0 {
		return nil, fmt.Errorf("the batch has no column %s", c.path[0])
	}
	arr := batch.Column(idx[0])
	var parents []arrow.Array // structs above the leaf, whose nulls are the leaf's
	for _, name := range c.path[1:] {
		s, ok := arr.(*array.Struct)
		if !ok {
			return nil, fmt.Errorf("column %s is not a struct in this batch", c.name())
		}
		j, ok := s.DataType().(*arrow.StructType).FieldIdx(name)
		if !ok {
			return nil, fmt.Errorf("the batch has no column %s", c.name())
		}
		parents = append(parents, s)
		arr = s.Field(j)
	}
	leaf := leafValue(arr)
	if len(parents) == 0 {
		return leaf, nil
	}
	return func(i int) ([]byte, error) {
		for _, p := range parents {
			if p.IsNull(i) {
				return nil, errNullValue
			}
		}
		return leaf(i)
	}, nil
}

// leafValue returns the value function of a leaf array whose type fieldSpec accepted.
func leafValue(arr arrow.Array) valueFunc {
	switch a := arr.(type) {
	case array.ExtensionArray:
		return leafValue(a.Storage())
	case *array.Dictionary:
		values := leafValue(a.Dictionary())
		return func(i int) ([]byte, error) {
			if a.IsNull(i) {
				return nil, errNullValue
			}
			return values(a.GetValueIndex(i))
		}
	case *array.BinaryView:
		return viewValue(a)
	case *array.StringView:
		return viewValue(a)
	}
	d := arr.Data()
	switch t := storageType(arr.DataType()).(type) {
	case *arrow.BinaryType, *arrow.StringType:
		o := arrow.Int32Traits.CastFromBytes(bytesOf(d.Buffers()[1]))
		return offsetsValue(d, func(j int) (int64, int64) { return int64(o[j]), int64(o[j+1]) }, bytesOf(d.Buffers()[2]))
	case *arrow.LargeBinaryType, *arrow.LargeStringType:
		o := arrow.Int64Traits.CastFromBytes(bytesOf(d.Buffers()[1]))
		return offsetsValue(d, func(j int) (int64, int64) { return o[j], o[j+1] }, bytesOf(d.Buffers()[2]))
	case *arrow.ListType:
		o := arrow.Int32Traits.CastFromBytes(bytesOf(d.Buffers()[1]))
		return listValue(d, func(j int) (int64, int64) { return int64(o[j]), int64(o[j+1]) })
	case *arrow.LargeListType:
		o := arrow.Int64Traits.CastFromBytes(bytesOf(d.Buffers()[1]))
		return listValue(d, func(j int) (int64, int64) { return o[j], o[j+1] })
	case *arrow.FixedSizeBinaryType:
		n, data := int64(t.ByteWidth), bytesOf(d.Buffers()[1])
		return func(i int) ([]byte, error) {
			if isNull(d, int64(i)) {
				return nil, errNullValue
			}
			j := int64(d.Offset() + i)
			return data[j*n : (j+1)*n], nil
		}
	}
	// A fixed-width scalar, or fixed-size lists of them.
	var scratch []byte
	return func(i int) ([]byte, error) {
		if isNull(d, int64(i)) {
			return nil, errNullValue
		}
		return elements(d, int64(i), int64(i)+1, &scratch)
	}
}

// viewArray is a binary or string view array: its values are not one run of bytes.
type viewArray[V ~string | ~[]byte] interface {
	IsNull(i int) bool
	Value(i int) V
}

// viewValue is the value function of a view array: each value copied into a scratch buffer.
func viewValue[V ~string | ~[]byte](a viewArray[V]) valueFunc {
	var scratch []byte
	return func(i int) ([]byte, error) {
		if a.IsNull(i) {
			return nil, errNullValue
		}
		scratch = append(scratch[:0], a.Value(i)...)
		return scratch, nil
	}
}

// offsetsValue is the value function of a binary or string array d whose value j (counted
// from the buffer's start, d's offset included) is data[offsets(j)]:offsets(j+1)].
func offsetsValue(d arrow.ArrayData, offsets func(j int) (int64, int64), data []byte) valueFunc {
	return func(i int) ([]byte, error) {
		if isNull(d, int64(i)) {
			return nil, errNullValue
		}
		start, end := offsets(d.Offset() + i)
		return data[start:end], nil
	}
}

// listValue is the value function of a list array d of fixed-width scalars.
func listValue(d arrow.ArrayData, offsets func(j int) (int64, int64)) valueFunc {
	child := d.Children()[0]
	var scratch []byte
	return func(i int) ([]byte, error) {
		if isNull(d, int64(i)) {
			return nil, errNullValue
		}
		start, end := offsets(d.Offset() + i)
		return elements(child, start, end, &scratch)
	}
}

// elements returns the bytes of elements [a, b) of d (d's offset not included), a fixed-width
// scalar array or fixed-size lists of them, refusing a null among them. Bools are unpacked
// into scratch, one byte each; other values are d's own bytes.
func elements(d arrow.ArrayData, a, b int64, scratch *[]byte) ([]byte, error) {
	for {
		if d.NullN() > 0 {
			for j := a; j < b; j++ {
				if isNull(d, j) {
					return nil, errNullInside
				}
			}
		}
		t := storageType(d.DataType())
		l, ok := t.(*arrow.FixedSizeListType)
		if !ok {
			off := int64(d.Offset())
			if t.ID() == arrow.BOOL {
				bits := bytesOf(d.Buffers()[1])
				*scratch = (*scratch)[:0]
				for j := off + a; j < off+b; j++ {
					var v byte
					if bitutil.BitIsSet(bits, int(j)) {
						v = 1
					}
					*scratch = append(*scratch, v)
				}
				return *scratch, nil
			}
			_, size, _ := scalarDType(t)
			w := int64(size)
			return bytesOf(d.Buffers()[1])[(off+a)*w : (off+b)*w], nil
		}
		n, off := int64(l.Len()), int64(d.Offset())
		a, b = (off+a)*n, (off+b)*n
		d = d.Children()[0]
	}
}

// columnBytes returns rows [a, b) of a column array as one run of bytes and, variable, each
// value's length (appended to lens), when the array holds them so: no nulls, and fixed-width
// scalars or fixed-size lists of them (bools unpacked into scratch, a byte each),
// fixed-size binary, or binary and strings. It reports false for any other array, which the
// caller reads value by value.
func columnBytes(arr arrow.Array, variable bool, a, b int, scratch *[]byte, lens []uint64) ([]byte, []uint64, bool) {
	if e, ok := arr.(array.ExtensionArray); ok {
		arr = e.Storage()
	}
	d := arr.Data()
	if d.NullN() > 0 {
		return nil, nil, false
	}
	switch arr.(type) {
	case *array.Dictionary, *array.BinaryView, *array.StringView:
		return nil, nil, false
	}
	off := d.Offset()
	var o32 []int32
	var o64 []int64
	switch t := storageType(arr.DataType()).(type) {
	case *arrow.BinaryType, *arrow.StringType:
		o32 = arrow.Int32Traits.CastFromBytes(bytesOf(d.Buffers()[1]))
	case *arrow.LargeBinaryType, *arrow.LargeStringType:
		o64 = arrow.Int64Traits.CastFromBytes(bytesOf(d.Buffers()[1]))
	case *arrow.FixedSizeBinaryType:
		n := t.ByteWidth
		if variable {
			return nil, nil, false
		}
		return bytesOf(d.Buffers()[1])[(off+a)*n : (off+b)*n], nil, true
	case *arrow.ListType, *arrow.LargeListType:
		return nil, nil, false
	default:
		if variable {
			return nil, nil, false
		}
		data, err := elements(d, int64(a), int64(b), scratch)
		if err != nil {
			return nil, nil, false
		}
		return data, nil, true
	}
	if !variable {
		return nil, nil, false
	}
	at := func(j int) int64 {
		if o32 != nil {
			return int64(o32[j])
		}
		return o64[j]
	}
	for j := off + a; j < off+b; j++ {
		lens = append(lens, uint64(at(j+1)-at(j)))
	}
	return bytesOf(d.Buffers()[2])[at(off+a):at(off+b)], lens, true
}

// isNull reports whether element i of d (d's offset not included) is null.
func isNull(d arrow.ArrayData, i int64) bool {
	if d.NullN() == 0 {
		return false
	}
	bm := d.Buffers()[0]
	if bm == nil {
		return d.NullN() == d.Len() // an array of nulls without a bitmap
	}
	return !bitutil.BitIsSet(bm.Bytes(), d.Offset()+int(i))
}

// bytesOf is a buffer's bytes, nil for a missing buffer (an array of empty values).
func bytesOf(b *memory.Buffer) []byte {
	if b == nil {
		return nil
	}
	return b.Bytes()
}

// hostLittleEndian reports whether Arrow's buffers, in the host's byte order, are already
// the little-endian values fields hold.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1
