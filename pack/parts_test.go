package pack

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
)

func TestPartShare(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 100, 1001} {
		for _, parts := range []int{1, 2, 3, 4, 7, 64} {
			next := 0
			for i := 0; i < parts; i++ {
				lo, hi := Part{i, parts}.Share(n)
				require.Equal(t, next, lo, "n %d part %d/%d starts where the one before ends", n, i, parts)
				require.LessOrEqual(t, lo, hi)
				require.LessOrEqual(t, hi-lo, (n+parts-1)/parts, "shares are even")
				require.GreaterOrEqual(t, hi-lo, n/parts, "shares are even")
				next = hi
			}
			require.Equal(t, n, next, "n %d in %d parts: every input once", n, parts)
		}
	}
	lo, hi := Part{1, 4}.Share(10) // floor(10/4), floor(20/4)
	require.Equal(t, []int{2, 5}, []int{lo, hi})
	lo, hi = Part{0, 4}.Share(2) // 2 inputs, 4 parts: part 0 is empty
	require.Equal(t, lo, hi)
}

func TestParsePart(t *testing.T) {
	p, err := ParsePart("3/4")
	require.NoError(t, err)
	require.Equal(t, Part{3, 4}, p)
	require.Equal(t, "part-3-of-4", p.Name())
	for _, bad := range []string{"4/4", "-1/4", "1/0", "1", "a/b", "1/4/5", ""} {
		_, err := ParsePart(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "--part")
	}
	require.NotEqual(t, PartSeed(7, 0), PartSeed(7, 1))
	require.NotEqual(t, PartSeed(7, 0), PartSeed(8, 0))
	require.Equal(t, PartSeed(7, 2), PartSeed(7, 2))
}

func TestExpandInputs(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.raw", "a.raw", "c.raw"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
	got, err := ExpandInputs([]string{filepath.Join(dir, "*.raw")})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "a.raw"), filepath.Join(dir, "b.raw"), filepath.Join(dir, "c.raw")}, got)
	list := filepath.Join(dir, "list")
	require.NoError(t, os.WriteFile(list, []byte("c.raw\n\n# comment\na.raw\n"), 0o644))
	got, err = ExpandInputs([]string{"@" + list, "z"})
	require.NoError(t, err)
	require.Equal(t, []string{"c.raw", "a.raw", "z"}, got)
	_, err = ExpandInputs([]string{filepath.Join(dir, "*.npy")})
	require.ErrorContains(t, err, "matches no file")
}

// writeRecords writes records first..first+n-1 of 16 bytes (the record's number twice) to
// name in dir.
func writeRecords(t *testing.T, dir, name string, first, n uint64) string {
	b := make([]byte, 0, 16*n)
	for k := first; k < first+n; k++ {
		b = binary.LittleEndian.AppendUint64(b, k)
		b = binary.LittleEndian.AppendUint64(b, ^k)
	}
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// rawInputs writes counts[i] records to in-i.raw, numbered on from input to input.
func rawInputs(t *testing.T, counts ...uint64) []string {
	dir := t.TempDir()
	var paths []string
	var next uint64
	for i, n := range counts {
		paths = append(paths, writeRecords(t, dir, fmt.Sprintf("in-%02d.raw", i), next, n))
		next += n
	}
	return paths
}

// packParts packs the parts of inputs into out.
func packParts(t *testing.T, inputs []string, out string, parts int, opt Options) {
	for i := 0; i < parts; i++ {
		_, err := PackPart(context.Background(), inputs, out, Part{i, parts}, opt)
		require.NoError(t, err, "part %d/%d", i, parts)
	}
}

// checkMerged requires that the merged dataset in out holds records 0..want-1 once each, and
// that each record's id is its number (one pack's numbering).
func checkMerged(t *testing.T, out string, want uint64) *layout.Manifest {
	data, err := os.ReadFile(filepath.Join(out, layout.ManifestName))
	require.NoError(t, err)
	m, err := layout.ParseManifest(out, data)
	require.NoError(t, err)
	require.Equal(t, want, m.Records)
	seen := make([]bool, want)
	var pos uint64
	for _, b := range m.Blocks {
		recs, err := os.ReadFile(filepath.Join(out, b.File))
		require.NoError(t, err)
		require.Equal(t, b.CRC32C, layout.CRC32C(recs))
		var ids []byte
		if m.IDs {
			ids, err = os.ReadFile(filepath.Join(out, b.IDsFile))
			require.NoError(t, err)
			require.Equal(t, b.IDsCRC32C, layout.CRC32C(ids))
		}
		for r := uint64(0); r < b.Records; r++ {
			k := binary.LittleEndian.Uint64(recs[16*r:])
			require.Equal(t, ^k, binary.LittleEndian.Uint64(recs[16*r+8:]))
			id := pos
			if m.IDs {
				id = binary.LittleEndian.Uint64(ids[8*r:])
			}
			require.Equal(t, k, id, "record %d's id is its index in the inputs", k)
			require.False(t, seen[k], "record %d twice", k)
			seen[k] = true
			pos++
		}
	}
	return m
}

func TestPackPartsMerge(t *testing.T) {
	inputs := rawInputs(t, 300, 10, 555, 1, 200, 77)
	for _, noShuffle := range []bool{false, true} {
		out := t.TempDir()
		opt := Options{Format: Raw, RecordSize: 16, BlockSize: 1024, Seed: 5, NoShuffle: noShuffle}
		packParts(t, inputs, out, 4, opt)
		res, err := Merge(out, false)
		require.NoError(t, err)
		require.Equal(t, 4, res.Parts)
		m := checkMerged(t, out, 1143)
		require.False(t, m.PreShuffle.Shuffled, "pre-shuffled within parts only")
		require.Equal(t, !noShuffle, m.IDs)
		require.Equal(t, uint64(5), m.PreShuffle.Seed)
		_, err = Merge(out, false)
		require.ErrorContains(t, err, "--force")
		_, err = PackPart(context.Background(), inputs, out, Part{0, 4}, opt)
		require.ErrorContains(t, err, "--force")
		_, err = Merge(out, true)
		require.NoError(t, err)
		checkMerged(t, out, 1143)
		forced := opt
		forced.Force = true
		_, err = PackPart(context.Background(), inputs, out, Part{2, 4}, forced)
		require.NoError(t, err)
		_, err = os.Stat(filepath.Join(out, layout.ManifestName))
		require.ErrorIs(t, err, os.ErrNotExist, "a part packed again with --force removes the merged manifest")
		_, err = Merge(out, false)
		require.NoError(t, err)
		checkMerged(t, out, 1143)
	}
}

func TestPackPartsEmptyParts(t *testing.T) {
	inputs := rawInputs(t, 40, 50)
	out := t.TempDir()
	packParts(t, inputs, out, 5, Options{Format: Raw, RecordSize: 16, BlockSize: 256})
	res, err := Merge(out, false)
	require.NoError(t, err)
	require.Equal(t, 3, res.Empty)
	checkMerged(t, out, 90)
}

// TestPackPartsEmptyInputs: an empty input adds no records, whether among others of its part
// or the part's only one (an empty part, as a part with no inputs is); a .npy of no rows and a
// file of only a header alike. One pack of one empty input still says there is nothing.
func TestPackPartsEmptyInputs(t *testing.T) {
	inputs := rawInputs(t, 40, 0, 50, 0, 0, 7)
	for _, parts := range []int{2, 3, 6} {
		out := t.TempDir()
		packParts(t, inputs, out, parts, Options{Format: Raw, RecordSize: 16, BlockSize: 256})
		res, err := Merge(out, false)
		require.NoError(t, err, "%d parts", parts)
		checkMerged(t, out, 97)
		if parts == 6 {
			require.Equal(t, 3, res.Empty)
		}
	}

	dir := t.TempDir()
	npy := func(name string, rows int) string {
		p := filepath.Join(dir, name)
		hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 4), }", rows)
		hdr += strings.Repeat(" ", 64-(10+len(hdr)+1)%64) + "\n"
		b := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
		b = append(append(b, hdr...), make([]byte, 16*rows)...)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	in := []string{npy("a.npy", 30), npy("b.npy", 0), npy("c.npy", 20)}
	out := t.TempDir()
	packParts(t, in, out, 3, Options{Format: Npy, BlockSize: 256})
	res, err := Merge(out, false)
	require.NoError(t, err)
	require.Equal(t, 1, res.Empty)
	require.Equal(t, uint64(50), res.Manifest.Records)

	head := filepath.Join(dir, "head.txt")
	require.NoError(t, os.WriteFile(head, []byte("header\n"), 0o644))
	lines := filepath.Join(dir, "lines.txt")
	require.NoError(t, os.WriteFile(lines, []byte("header\na\nb\n"), 0o644))
	out = t.TempDir()
	packParts(t, []string{lines, head}, out, 2, Options{Format: Lines, SkipHeader: true, BlockSize: 256})
	res, err = Merge(out, false)
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Manifest.Records)

	_, err = Pack(context.Background(), in[1], t.TempDir(), Options{Format: Npy})
	require.ErrorContains(t, err, "holds no records (its first axis is 0): nothing to pack")
}

// TestPackPartsAutoBlock: with no block size, every part chooses the one a pack of all the
// inputs would, so that the parts agree.
func TestPackPartsAutoBlock(t *testing.T) {
	inputs := rawInputs(t, 1000, 1000, 20000)
	out := t.TempDir()
	packParts(t, inputs, out, 3, Options{Format: Raw, RecordSize: 16})
	_, err := Merge(out, false)
	require.NoError(t, err)
	checkMerged(t, out, 22000)
}

func TestPackPartsLinesAndFiles(t *testing.T) {
	dir := t.TempDir()
	var inputs []string
	for i := 0; i < 3; i++ {
		p := filepath.Join(dir, fmt.Sprintf("%d.txt", i))
		require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf("h\n%d-a\n%d-b\n", i, i)), 0o644))
		inputs = append(inputs, p)
	}
	out := t.TempDir()
	packParts(t, inputs, out, 2, Options{Format: Lines, SkipHeader: true, BlockSize: 4})
	_, err := Merge(out, false)
	require.NoError(t, err)

	tree := t.TempDir()
	for _, n := range []string{"a/1", "a/2", "b/1", "c", "d/e/f"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(tree, n)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(tree, n), []byte(n), 0o644))
	}
	out = t.TempDir()
	packParts(t, []string{tree}, out, 3, Options{Format: Files, BlockSize: 4})
	res, err := Merge(out, false)
	require.NoError(t, err)
	require.NotNil(t, res.Manifest.Names)
	names, err := os.ReadFile(filepath.Join(out, res.Manifest.Names.File))
	require.NoError(t, err)
	require.Equal(t, "a/1\na/2\nb/1\nc\nd/e/f\n", string(names))
}

func TestMergeRefuses(t *testing.T) {
	inputs := rawInputs(t, 100, 100, 100, 100)
	opt := Options{Format: Raw, RecordSize: 16, BlockSize: 512}
	fresh := func() string {
		out := t.TempDir()
		packParts(t, inputs, out, 4, opt)
		return out
	}
	refuse := func(out, want string) {
		t.Helper()
		_, err := Merge(out, false)
		require.Error(t, err)
		require.Contains(t, err.Error(), want)
		require.NotContains(t, err.Error(), "\n")
		_, err = os.Stat(filepath.Join(out, layout.ManifestName))
		require.ErrorIs(t, err, os.ErrNotExist, "a refused merge writes no manifest")
	}
	out := fresh()
	require.NoError(t, os.Remove(filepath.Join(out, PartsDir, "part-2-of-4.json")))
	refuse(out, "part 2 of 4 is missing")

	out = fresh()
	_, err := PackPart(context.Background(), inputs, out, Part{1, 3}, opt)
	require.NoError(t, err)
	refuse(out, "part 1 is there twice: part-1-of-3 and part-1-of-4")

	out = fresh()
	other := opt
	other.Seed = 9
	_, err = PackPart(context.Background(), inputs, out, Part{3, 4}, other)
	require.NoError(t, err)
	refuse(out, "part-3-of-4 is foreign: its options")

	out = fresh()
	_, err = PackPart(context.Background(), inputs[:3], out, Part{3, 4}, opt)
	require.NoError(t, err)
	refuse(out, "part-3-of-4 is foreign: it packed other inputs")

	out = fresh()
	require.NoError(t, os.Remove(filepath.Join(out, PartsDir, "part-1-of-4", "blocks", "000001.bin")))
	refuse(out, "part-1-of-4's dataset does not check: block 1")

	out = fresh()
	ids := filepath.Join(out, PartsDir, "part-0-of-4", "blocks", "000000.ids")
	b, err := os.ReadFile(ids)
	require.NoError(t, err)
	b[0] ^= 1
	require.NoError(t, os.WriteFile(ids, b, 0o644))
	refuse(out, "000000.ids is damaged")

	out = fresh()
	require.NoError(t, os.WriteFile(filepath.Join(out, PartsDir, "part-0-of-4.json"), []byte("{"), 0o644))
	refuse(out, "part-0-of-4.json is not a part manifest")

	refuse(t.TempDir(), "no parts to merge")

	// A failed part is packed again alone, and the merge goes on.
	out = fresh()
	require.NoError(t, os.RemoveAll(filepath.Join(out, PartsDir, "part-2-of-4")))
	refuse(out, "part-2-of-4's dataset cannot be read")
	_, err = PackPart(context.Background(), inputs, out, Part{2, 4}, opt)
	require.NoError(t, err)
	_, err = Merge(out, false)
	require.NoError(t, err)
	checkMerged(t, out, 400)
}

func TestPackPartsRefusesMixedRecords(t *testing.T) {
	dir := t.TempDir()
	a := writeRecords(t, dir, "a.raw", 0, 10)
	b := filepath.Join(dir, "b.raw")
	require.NoError(t, os.WriteFile(b, make([]byte, 24), 0o644)) // not a multiple of 16
	_, err := PackPart(context.Background(), []string{a, b}, t.TempDir(), Part{0, 1}, Options{Format: Raw, RecordSize: 16})
	require.ErrorContains(t, err, "not a multiple of the record size")
}

// TestPackPartsSeveralFields packs WebDataset shards of two fields in parts: each part's
// field datasets go in the field's folder, the merge writes each field's manifest over them
// and blockfs-fields.json last; parts whose fields differ are refused at the merge.
func TestPackPartsSeveralFields(t *testing.T) {
	dir := t.TempDir()
	shards := writeShards(t, dir, "pax", []string{"0.tar", "1.tar", "2.tar"}, [][]wdsItem{
		{sampleItem("a", map[string][]byte{"jpg": []byte("x"), "cls": []byte("1")})},
		{sampleItem("b", map[string][]byte{"jpg": []byte("yy"), "cls": []byte("2")})},
		{sampleItem("c", map[string][]byte{"jpg": []byte("zzz"), "cls": []byte("3")})},
	})
	out := t.TempDir()
	for i := 0; i < 2; i++ {
		pr, err := PackPart(context.Background(), shards, out, Part{i, 2}, Options{})
		require.NoError(t, err)
		require.Len(t, pr.Manifest.Fields, 2)
	}
	_, err := os.Stat(filepath.Join(out, "fields", "jpg", "parts", "part-1-of-2", "blockfs.json"))
	require.NoError(t, err)
	res, err := Merge(out, false)
	require.NoError(t, err)
	require.NotNil(t, res.Fields)
	assert.EqualValues(t, 3, res.Fields.Records)
	assert.EqualValues(t, 3, res.Manifest.Records)
	fm, err := layout.ReadFieldsManifest(out)
	require.NoError(t, err)
	for _, fl := range fm.Fields {
		data, err := os.ReadFile(filepath.Join(out, fl.Dir, "blockfs.json"))
		require.NoError(t, err)
		m, err := layout.ParseManifest(fl.Dir, data)
		require.NoError(t, err)
		assert.EqualValues(t, 3, m.Records, fl.Name)
		assert.True(t, strings.HasPrefix(m.Blocks[0].File, "parts/part-0-of-2/"), m.Blocks[0].File)
	}
	_, err = Merge(out, false)
	require.ErrorContains(t, err, "holds a merged dataset already")

	// A shard of other fields: its part's fields are not the others'.
	other := writeShards(t, dir, "pax", []string{"3.tar"}, [][]wdsItem{
		{sampleItem("d", map[string][]byte{"jpg": []byte("w"), "txt": []byte("4")})},
	})
	out2 := t.TempDir()
	for i := 0; i < 2; i++ {
		_, err := PackPart(context.Background(), append(shards[:1:1], other...), out2, Part{i, 2}, Options{})
		require.NoError(t, err)
	}
	_, err = Merge(out2, false)
	require.ErrorContains(t, err, "part-1-of-2 is foreign: its fields are")
}

// TestPackPartsTFRecord packs TFRecord files (samples of one field) in parts: each part is a
// plain dataset of variable records in input order, and the merge numbers them as one pack.
func TestPackPartsTFRecord(t *testing.T) {
	dir := t.TempDir()
	var inputs []string
	var want [][]byte
	for i, n := range []int{40, 3, 70, 25, 1} {
		var recs [][]byte
		for j := 0; j < n; j++ {
			recs = append(recs, []byte(fmt.Sprintf("record %d%s", len(want), strings.Repeat("x", len(want)%37))))
			want = append(want, recs[len(recs)-1])
		}
		p := filepath.Join(dir, fmt.Sprintf("%02d.tfrecord", i))
		require.NoError(t, os.WriteFile(p, dstest.TFRecord(recs), 0o644))
		inputs = append(inputs, p)
	}
	out := t.TempDir()
	globbed, err := ExpandInputs([]string{filepath.Join(dir, "*.tfrecord")})
	require.NoError(t, err)
	packParts(t, globbed, out, 3, Options{BlockSize: 256})
	res, err := Merge(out, false)
	require.NoError(t, err)
	m := res.Manifest
	require.Equal(t, uint64(len(want)), m.Records)
	require.False(t, m.IDs || m.PreShuffle.Shuffled, "input order")
	var got [][]byte
	for _, b := range m.Blocks {
		data, err := os.ReadFile(filepath.Join(out, b.File))
		require.NoError(t, err)
		offs, err := os.ReadFile(filepath.Join(out, b.OffsetsFile))
		require.NoError(t, err)
		for r := uint64(0); r < b.Records; r++ {
			got = append(got, data[binary.LittleEndian.Uint64(offs[8*r:]):binary.LittleEndian.Uint64(offs[8*r+8:])])
		}
	}
	require.Equal(t, want, got)

	_, err = PackPart(context.Background(), inputs, t.TempDir(), Part{0, 2}, Options{NoShuffle: true})
	require.ErrorContains(t, err, "--no-shuffle")
}

func TestPartName(t *testing.T) {
	for _, c := range []struct {
		name, suffix string
		want         Part
		ok, bad      bool
	}{
		{"part-1-of-4.json", ".json", Part{1, 4}, true, false},
		{"part-0-of-1", "", Part{0, 1}, true, false},
		{"part-4-of-4.json", ".json", Part{}, true, true},
		{"part-0-of-1048577", "", Part{}, true, true},
		{"part-0-of-99999999999999999999999", "", Part{}, true, true},
		{"part-01-of-4", "", Part{}, true, true},
		{"part-1-of-4.json", "", Part{}, false, false},
		{"part-a-of-4", "", Part{}, false, false},
		{"other.json", ".json", Part{}, false, false},
	} {
		p, ok, err := partName(c.name, c.suffix)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.bad, err != nil, "%s: %v", c.name, err)
		assert.Equal(t, c.want, p, c.name)
	}
}

// TestMergeRace: a part packed again while the merge reads the parts (here: between its reads
// and its manifest, through beforeManifest) is refused, naming the file, and no manifest is
// written; before, the merge wrote a manifest over the new blocks with the old ones' checksums
// and ids.
func TestMergeRace(t *testing.T) {
	inputs := rawInputs(t, 300, 200)
	other := rawInputs(t, 150, 350) // the same total, dealt otherwise
	for _, noShuffle := range []bool{false, true} {
		out := t.TempDir()
		opt := Options{Format: Raw, RecordSize: 16, BlockSize: 1024, Seed: 5, NoShuffle: noShuffle}
		packParts(t, inputs, out, 2, opt)
		beforeManifest = func() {
			_, err := PackPart(context.Background(), other, out, Part{1, 2}, opt)
			require.NoError(t, err)
		}
		_, err := Merge(out, false)
		beforeManifest = func() {}
		require.Error(t, err)
		assert.Contains(t, err.Error(), "changed while the parts were merged")
		assert.NoFileExists(t, filepath.Join(out, layout.ManifestName))

		_, err = Merge(out, false)
		require.ErrorContains(t, err, "is foreign", "the part as it is now is refused as any other")
		packParts(t, inputs, out, 2, opt)
		_, err = Merge(out, false)
		require.NoError(t, err, "merged once nothing changes")
		checkMerged(t, out, 500)
	}
}

// TestMergeLocked: a second merge of one OUT while the first runs (here: from inside the
// first, at beforeManifest) is refused at once, saying so, and the first merges; the lock
// goes with the merge.
func TestMergeLocked(t *testing.T) {
	inputs := rawInputs(t, 300, 200)
	out := t.TempDir()
	opt := Options{Format: Raw, RecordSize: 16, BlockSize: 1024, Seed: 5}
	packParts(t, inputs, out, 2, opt)
	var second error
	beforeManifest = func() { _, second = Merge(out, true) }
	_, err := Merge(out, false)
	beforeManifest = func() {}
	require.NoError(t, err)
	require.Error(t, second)
	assert.Equal(t, "another merge of "+out+" is running: wait for it to end (and merge again if it failed)", second.Error())
	checkMerged(t, out, 500)
	_, err = Merge(out, true)
	require.NoError(t, err, "the lock went with the first merge")
	_, err = MergeIndex(out, false)
	require.NotContains(t, fmt.Sprint(err), "another merge", "index --merge takes the same lock, free now")
}

// TestPackPartInputChanged: an input that is another size when its part opens it than when the
// inputs were listed is refused, naming it (one emptied since became no records, silently).
func TestPackPartInputChanged(t *testing.T) {
	inputs := rawInputs(t, 3, 2) // records of 16 bytes
	open := func(p string) (input, element, error) { return openRaw(p, 16, true) }
	m, err := openMulti(inputs, []int64{48, 16}, open) // the second listed at one record
	require.NoError(t, err)
	defer func() {
		if m.cur != nil {
			m.cur.close()
		}
	}()
	var got int
	for {
		_, err = m.next()
		if err != nil {
			break
		}
		got++
	}
	require.ErrorContains(t, err, inputs[1]+" is 32 bytes, 16 bytes when the inputs were listed: did it change while being packed? Pack the part again")
	assert.Equal(t, 3, got)
	_, err = openMulti(inputs, []int64{0, 32}, open)
	require.ErrorContains(t, err, inputs[0]+" is 48 bytes, 0 bytes when the inputs were listed")
}
