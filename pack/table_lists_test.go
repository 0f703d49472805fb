//go:build tables

package pack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTableFixedLists: a list column of numbers whose values in the first batch all have one
// length is a fixed field of that shape (DuckDB's FLOAT[n] arrays are Parquet lists), read
// value for value; a list whose lengths vary there stays variable; a fixed one whose later
// value has another length is refused, naming the column, the row and both lengths.
func TestTableFixedLists(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "emb", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
		{Name: "toks", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	}, nil)
	batch := func(lo, n int, short int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		emb, toks := b.Field(0).(*array.ListBuilder), b.Field(1).(*array.ListBuilder)
		for i := lo; i < lo+n; i++ {
			emb.Append(true)
			k := 4
			if i == short {
				k = 3
			}
			for j := range k {
				emb.ValueBuilder().(*array.Float32Builder).Append(float32(i) + float32(j)/4)
			}
			toks.Append(true)
			for j := range i % 3 {
				toks.ValueBuilder().(*array.Int32Builder).Append(int32(i*10 + j))
			}
		}
		return b.NewRecordBatch()
	}
	write := func(name string, short int) string {
		p := filepath.Join(t.TempDir(), name)
		f, err := os.Create(p)
		require.NoError(t, err)
		w, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
		require.NoError(t, err)
		for lo := 0; lo < 300; lo += 100 {
			rec := batch(lo, 100, short)
			require.NoError(t, w.Write(rec))
			rec.Release()
		}
		require.NoError(t, w.Close())
		require.NoError(t, f.Close())
		return p
	}

	r, err := openArrow([]string{write("even.arrow", -1)}, nil, checkedAlloc(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"emb fixed <f4 [4] 16", "toks variable <i4 [] 0"}, describeFields(r.Fields()))
	rows := readTable(t, r)
	require.NoError(t, r.Close())
	require.Len(t, rows, 300)
	for i, row := range rows {
		want := le([]float32{float32(i), float32(i) + 0.25, float32(i) + 0.5, float32(i) + 0.75})
		require.Equal(t, want, row[0], "row %d", i)
	}

	r, err = openArrow([]string{write("uneven.arrow", 150)}, nil, checkedAlloc(t))
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, "emb fixed <f4 [4] 16", describeFields(r.Fields())[0])
	for {
		_, err = r.Next()
		if err != nil {
			break
		}
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "column emb has 3 elements at row 150, where the first rows' lists have 4 each")
	assert.Contains(t, err.Error(), "--columns")
}
