//go:build tables

package pack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/layout"
)

// writeRowsArrow writes an Arrow IPC file of rows lo..hi: row (int64, fixed) and img (binary
// of 100 bytes, variable).
func writeRowsArrow(t *testing.T, path string, lo, hi int) {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{{Name: "row", Type: arrow.PrimitiveTypes.Int64}, {Name: "img", Type: arrow.BinaryTypes.Binary}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := lo; i < hi; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		img := make([]byte, 100)
		for k := range img {
			img[k] = byte(i + k)
		}
		b.Field(1).(*array.BinaryBuilder).Append(img)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	require.NoError(t, err)
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(schema))
	require.NoError(t, err)
	require.NoError(t, w.Write(rec))
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
}

// TestPackPartsOwnBlocks: which fields get blocks of their own is decided once for all the
// parts, as one pack of all the inputs decides it: a last part too small to fill a block (one
// pack of it alone would give row no blocks of its own) agrees with the others, and the
// merged fields are one pack's.
func TestPackPartsOwnBlocks(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i, n := range []int{300, 300, 5} {
		p := filepath.Join(dir, fmt.Sprintf("%d.arrow", i))
		writeRowsArrow(t, p, 600*i, 600*i+n)
		files = append(files, p)
	}
	opt := Options{BlockSize: 4 << 10}
	out := t.TempDir()
	for i := 0; i < 3; i++ {
		_, err := PackPart(context.Background(), files, out, Part{i, 3}, opt)
		require.NoError(t, err)
	}
	res, err := Merge(out, false)
	require.NoError(t, err)
	assert.EqualValues(t, 605, res.Fields.Records)

	r, err := OpenSamples(Arrow, files, FieldOptions{})
	require.NoError(t, err)
	whole := filepath.Join(t.TempDir(), "whole")
	one, err := PackFields(context.Background(), r, whole, Arrow, len(files), opt)
	require.NoError(t, err)
	require.Equal(t, layout.OwnBlocks, one.Manifest.Fields[0].Blocks, "one pack gives row blocks of its own")
	fm, err := layout.ReadFieldsManifest(out)
	require.NoError(t, err)
	wm, err := layout.ReadFieldsManifest(whole)
	require.NoError(t, err)
	assert.Equal(t, wm.Fields, fm.Fields, "the parts decide as one pack")
	assert.Equal(t, wm.Records, fm.Records)
}
