package layout

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A FieldWriter cuts every field at the same samples, whatever their sizes, and commits the
// whole or nothing.
func TestFieldWriter(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "ds")
	fields := []Field{{Name: "image", Kind: Variable}, {Name: "label", Kind: Fixed, RecordSize: 8, DType: "<i8"}, {Name: "note", Kind: Variable}}
	w, err := CreateFields(dst, fields, 64<<10, "test", false)
	require.NoError(t, err)
	value := func(i int) [][]byte {
		return [][]byte{bytes.Repeat([]byte{byte(i)}, 100+i%3000), []byte(fmt.Sprintf("%08d", i)), bytes.Repeat([]byte("n"), i%5)}
	}
	for i := range 2000 {
		require.NoError(t, w.Append(value(i)))
	}
	_, err = os.Stat(dst)
	require.True(t, os.IsNotExist(err), "nothing at dst before Commit")
	m, err := w.Commit()
	require.NoError(t, err)
	require.EqualValues(t, 2000, m.Records)
	require.True(t, IsFields(dst))
	read, err := ReadFieldsManifest(dst)
	require.NoError(t, err)
	require.Equal(t, m.Records, read.Records)
	require.Equal(t, "fields/label", read.Fields[1].Dir)
	var counts [][]uint64
	for _, f := range read.Fields {
		raw, err := os.ReadFile(filepath.Join(dst, f.Dir, ManifestName))
		require.NoError(t, err, f.Name)
		man, err := ParseManifest(f.Name, raw)
		require.NoError(t, err, f.Name)
		require.EqualValues(t, 2000, man.Records, f.Name)
		var c []uint64
		for _, b := range man.Blocks {
			c = append(c, b.Records)
		}
		counts = append(counts, c)
	}
	require.Greater(t, len(counts[0]), 10, "several blocks")
	require.Equal(t, counts[0], counts[2])
	// The label's 8 B values take a few hundred bytes of a block of samples: it is cut at 64 KiB
	// blocks of its own (8192 labels), and the other fields are its anchor.
	require.Equal(t, []bool{false, true, false}, []bool{read.Fields[0].Own(), read.Fields[1].Own(), read.Fields[2].Own()})
	require.Equal(t, []uint64{2000}, counts[1])
	require.Equal(t, 0, read.Anchor())
	left, _ := os.ReadDir(dir)
	require.Len(t, left, 1, "no temporary directory left: %v", left)

	// Abort leaves nothing; a second dataset at dst needs force.
	_, err = CreateFields(dst, fields, 64<<10, "test", false)
	require.ErrorIs(t, err, ErrExists)
	w, err = CreateFields(filepath.Join(dir, "other"), fields, 64<<10, "test", false)
	require.NoError(t, err)
	require.NoError(t, w.Append(value(1)))
	w.Abort()
	left, _ = os.ReadDir(dir)
	require.Len(t, left, 1, "Abort left %v", left)
}

// Fields that are all small and fixed stay cut at the samples: one must anchor the order.
func TestFieldWriterAllSmall(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "ds")
	fields := []Field{{Name: "a", Kind: Fixed, RecordSize: 4}, {Name: "b", Kind: Fixed, RecordSize: 8}}
	w, err := CreateFields(dst, fields, 4<<10, "test", false)
	require.NoError(t, err)
	for i := range 3000 {
		require.NoError(t, w.Append([][]byte{[]byte(fmt.Sprintf("%04d", i%10000)), []byte(fmt.Sprintf("%08d", i))}))
	}
	m, err := w.Commit()
	require.NoError(t, err)
	require.False(t, m.Fields[0].Own() || m.Fields[1].Own())
}

// A manifest whose every field has blocks of its own, or a variable one with them, is refused.
func TestFieldsManifestOwnRefused(t *testing.T) {
	for _, body := range []string{
		`{"format":"blockfs-fields","version":1,"records":1,"fields":[{"name":"a","kind":"fixed","record_size":4,"dir":"fields/a","blocks":"own"}]}`,
		`{"format":"blockfs-fields","version":1,"records":1,"fields":[{"name":"a","kind":"variable","dir":"fields/a","blocks":"own"},{"name":"b","kind":"variable","dir":"fields/b"}]}`,
		`{"format":"blockfs-fields","version":1,"records":1,"fields":[{"name":"a","kind":"fixed","record_size":4,"dir":"fields/a","blocks":"mine"},{"name":"b","kind":"variable","dir":"fields/b"}]}`,
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, FieldsManifestName), []byte(body), 0o644))
		_, err := ReadFieldsManifest(dir)
		require.ErrorIs(t, err, ErrFormat, body)
	}
}

// AppendColumns writes the dataset Append of each sample writes, whatever the batches: the
// same cuts (at the samples, and of fields with blocks of their own), the same files.
func TestFieldWriterColumns(t *testing.T) {
	dir := t.TempDir()
	fields := []Field{{Name: "image", Kind: Variable}, {Name: "label", Kind: Fixed, RecordSize: 8},
		{Name: "vec", Kind: Fixed, RecordSize: 64}, {Name: "note", Kind: Variable}}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 5000
	samples := make([][][]byte, n)
	for i := range samples {
		samples[i] = [][]byte{bytes.Repeat([]byte{byte(i)}, rng.IntN(3000)), []byte(fmt.Sprintf("%08d", i)),
			bytes.Repeat([]byte{byte(i * 3)}, 64), bytes.Repeat([]byte("n"), rng.IntN(4))}
	}
	one, err := CreateFields(filepath.Join(dir, "one"), fields, 16<<10, "test", false)
	require.NoError(t, err)
	for _, s := range samples {
		require.NoError(t, one.Append(s))
	}
	_, err = one.Commit()
	require.NoError(t, err)
	cols, err := CreateFields(filepath.Join(dir, "cols"), fields, 16<<10, "test", false)
	require.NoError(t, err)
	for a := 0; a < n; {
		b := min(n, a+1+rng.IntN(700))
		data := make([][]byte, len(fields))
		lens := make([][]uint64, len(fields))
		for k, f := range fields {
			for _, s := range samples[a:b] {
				data[k] = append(data[k], s[k]...)
				if f.Kind == Variable {
					lens[k] = append(lens[k], uint64(len(s[k])))
				}
			}
			if f.Kind == Variable && lens[k] == nil {
				lens[k] = []uint64{}
			}
		}
		require.NoError(t, cols.AppendColumns(b-a, data, lens))
		a = b
	}
	m, err := cols.Commit()
	require.NoError(t, err)
	require.True(t, m.Fields[1].Own() && m.Fields[2].Own() && !m.Fields[0].Own(), "label and vec have blocks of their own: %+v", m.Fields)
	var files int
	require.NoError(t, filepath.WalkDir(filepath.Join(dir, "one"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(dir, "one"), path)
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dir, "cols", rel))
		require.NoError(t, err, rel)
		require.True(t, bytes.Equal(want, got), "%s differs", rel)
		files++
		return nil
	}))
	require.Greater(t, files, 20)

	// Columns that do not add up are refused.
	bad, err := CreateFields(filepath.Join(dir, "bad"), fields, 16<<10, "test", false)
	require.NoError(t, err)
	defer bad.Abort()
	require.Error(t, bad.AppendColumns(1, [][]byte{{1}, make([]byte, 7), make([]byte, 64), nil}, [][]uint64{{1}, nil, nil, {0}}))
	require.Error(t, bad.AppendColumns(1, [][]byte{{1}, make([]byte, 8), make([]byte, 64), nil}, [][]uint64{{2}, nil, nil, {0}}))
}

// The other fields' values take nothing: the label's values reach a block's worth by the
// first cut, and both ways of writing close its first block there.
func TestFieldWriterColumnsEmptyValues(t *testing.T) {
	dir := t.TempDir()
	fields := []Field{{Name: "txt", Kind: Variable}, {Name: "label", Kind: Fixed, RecordSize: 8}}
	const n = 3000
	write := func(name string, columns bool) string {
		w, err := CreateFields(filepath.Join(dir, name), fields, 4096, "test", false)
		require.NoError(t, err)
		if columns {
			var labels []byte
			for i := range n {
				labels = append(labels, fmt.Sprintf("%08d", i)...)
			}
			require.NoError(t, w.AppendColumns(n, [][]byte{nil, labels}, [][]uint64{make([]uint64, n), nil}))
		} else {
			for i := range n {
				require.NoError(t, w.Append([][]byte{nil, []byte(fmt.Sprintf("%08d", i))}))
			}
		}
		m, err := w.Commit()
		require.NoError(t, err)
		require.True(t, m.Fields[1].Own())
		raw, err := os.ReadFile(filepath.Join(dir, name, "fields", "label", ManifestName))
		require.NoError(t, err)
		return string(raw)
	}
	one, cols := write("one", false), write("cols", true)
	require.Equal(t, one, cols)
	man, err := ParseManifest("label", []byte(one))
	require.NoError(t, err)
	require.EqualValues(t, 512, man.Blocks[0].Records, "a block of 4096 B of labels")
}
