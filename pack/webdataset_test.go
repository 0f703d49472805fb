package pack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// webdatasetPy writes tar shards as webdataset's TarWriter.write does (webdataset
// src/webdataset/writer.py): per sample, the keys sorted, metadata keys ("_...") left out,
// each a member KEY.EXT, mode 0o444, owner bigdata, through tarfile.open(mode="w|"). Python's
// default format is PAX (TarWriter computes a format argument but does not pass it); the spec
// may ask for gnu or ustar too. Raw members (folders, links, metadata, odd names) go in as
// given. argv[1] is the JSON spec: {"format": ..., "shards": [{"path": ..., "items": [...]}]},
// an item {"sample": {"__key__": ..., EXT: hex}} or {"raw": {"name", "type", "data", "link"}}.
const webdatasetPy = `
import io, json, sys, tarfile

with open(sys.argv[1]) as f:
    spec = json.load(f)
fmt = {"pax": tarfile.PAX_FORMAT, "gnu": tarfile.GNU_FORMAT, "ustar": tarfile.USTAR_FORMAT}[spec["format"]]

def info(name, size=0):
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.mtime = 1700000000
    ti.mode = 0o444
    ti.uname = "bigdata"
    ti.gname = "bigdata"
    return ti

for shard in spec["shards"]:
    with open(shard["path"], "wb") as out:
        tf = tarfile.open(fileobj=out, mode="w|", format=fmt)
        for item in shard["items"]:
            if "sample" in item:
                obj = item["sample"]
                key = obj["__key__"]
                for k in sorted(obj.keys()):
                    if k == "__key__" or k[0] == "_":
                        continue
                    v = bytes.fromhex(obj[k])
                    tf.addfile(info(key + "." + k, len(v)), io.BytesIO(v))
            else:
                m = item["raw"]
                kind = m.get("type", "file")
                if kind == "dir":
                    ti = info(m["name"])
                    ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                    tf.addfile(ti)
                elif kind == "symlink":
                    ti = info(m["name"])
                    ti.type, ti.linkname = tarfile.SYMTYPE, m["link"]
                    tf.addfile(ti)
                else:
                    v = bytes.fromhex(m.get("data", ""))
                    tf.addfile(info(m["name"], len(v)), io.BytesIO(v))
        tf.close()
`

// wdsSample is a sample as TarWriter takes it: a key and values by extension.
type wdsSample struct {
	key  string
	vals map[string][]byte
}

// wdsItem is a shard's item: a sample, or one raw member.
type wdsItem struct {
	sample *wdsSample
	raw    *wdsRaw
}

type wdsRaw struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"` // file (default), dir, symlink
	Data string `json:"data,omitempty"` // hex
	Link string `json:"link,omitempty"`
}

func sampleItem(key string, vals map[string][]byte) wdsItem {
	return wdsItem{sample: &wdsSample{key, vals}}
}

func rawItem(name, typ string, data []byte) wdsItem {
	return wdsItem{raw: &wdsRaw{Name: name, Type: typ, Data: hex.EncodeToString(data), Link: "target"}}
}

// writeShards writes shards (name -> items, in order) in dir with webdatasetPy, and returns
// their paths in the order given.
func writeShards(t *testing.T, dir, format string, names []string, items [][]wdsItem) []string {
	t.Helper()
	type shard struct {
		Path  string `json:"path"`
		Items []any  `json:"items"`
	}
	spec := struct {
		Format string  `json:"format"`
		Shards []shard `json:"shards"`
	}{Format: format}
	var paths []string
	for i, name := range names {
		sh := shard{Path: filepath.Join(dir, name), Items: []any{}}
		for _, it := range items[i] {
			if it.raw != nil {
				sh.Items = append(sh.Items, map[string]any{"raw": it.raw})
				continue
			}
			obj := map[string]string{"__key__": it.sample.key}
			for ext, v := range it.sample.vals {
				obj[ext] = hex.EncodeToString(v)
			}
			sh.Items = append(sh.Items, map[string]any{"sample": obj})
		}
		spec.Shards = append(spec.Shards, sh)
		paths = append(paths, sh.Path)
	}
	js, err := json.Marshal(spec)
	require.NoError(t, err)
	sp := filepath.Join(t.TempDir(), "spec.json")
	require.NoError(t, os.WriteFile(sp, js, 0o644))
	runPython(t, webdatasetPy, sp)
	return paths
}

// gotSample is a sample read back: its key and values by field name, copied.
type gotSample struct {
	key  string
	vals map[string][]byte
}

// readSamples reads every sample of r, checking progress on the way.
func readSamples(t *testing.T, r SampleReader) ([]gotSample, error) {
	t.Helper()
	var got []gotSample
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
		require.Len(t, v, len(r.Fields()))
		s := gotSample{key: r.(interface{ Name() string }).Name(), vals: map[string][]byte{}}
		for j, f := range r.Fields() {
			require.NotNil(t, v[j], "field %s", f.Name)
			s.vals[f.Name] = bytes.Clone(v[j])
		}
		got = append(got, s)
	}
}

// checkSamples compares samples read with those written: every field of every sample, a field
// the sample lacks empty.
func checkSamples(t *testing.T, fields []FieldSpec, want []wdsSample, got []gotSample) {
	t.Helper()
	require.Equal(t, len(want), len(got), "samples")
	for i := range want {
		assert.Equal(t, want[i].key, got[i].key, "sample %d's key", i)
		for _, f := range fields {
			w, ok := want[i].vals[f.Name]
			if !ok {
				w = []byte{}
			}
			assert.True(t, bytes.Equal(w, got[i].vals[f.Name]), "sample %d (%s) field %s: %d bytes, want %d", i, want[i].key, f.Name, len(got[i].vals[f.Name]), len(w))
		}
	}
}

func fieldNames(t *testing.T, fields []FieldSpec) []string {
	var names []string
	for _, f := range fields {
		assert.Equal(t, VariableField, f.Kind, f.Name)
		assert.Equal(t, "", f.DType, f.Name)
		names = append(names, f.Name)
	}
	return names
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// imageNetLike returns n samples keyed "%06d" from first, with .jpg (random bytes, one of
// them larger than the read buffer), .cls and .json.
func imageNetLike(rng *rand.Rand, first, n int) []wdsSample {
	var out []wdsSample
	for i := first; i < first+n; i++ {
		size := 100 + rng.IntN(5000)
		if i == first+1 {
			size = 1<<20 + 1000 // more than the 1 MiB read buffer
		}
		out = append(out, wdsSample{key: fmt.Sprintf("%06d", i), vals: map[string][]byte{
			"jpg":  randomBytes(rng, size),
			"cls":  []byte(fmt.Sprint(i % 10)),
			"json": []byte(fmt.Sprintf(`{"id": %d, "caption": "sample %d"}`, i, i)),
		}})
	}
	return out
}

func itemsOf(samples []wdsSample) []wdsItem {
	var items []wdsItem
	for i := range samples {
		items = append(items, wdsItem{sample: &samples[i]})
	}
	return items
}

// TestWebDatasetShards reads three shards (one of them empty but for a folder) in each tar
// format Python writes, and checks every field of every sample, the fields' order (TarWriter
// sorts a sample's extensions: cls, jpg, json), the keys and the count.
func TestWebDatasetShards(t *testing.T) {
	for _, format := range []string{"pax", "gnu", "ustar"} {
		t.Run(format, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 5))
			a, c := imageNetLike(rng, 0, 6), imageNetLike(rng, 6, 5)
			// "b" before "a": the shards are read in the order given.
			paths := writeShards(t, t.TempDir(), format, []string{"b.tar", "empty.tar", "a.tar"},
				[][]wdsItem{itemsOf(a), {rawItem("folder", "dir", nil)}, itemsOf(c)})
			r, err := OpenWebDataset(paths, false)
			require.NoError(t, err)
			defer r.Close()
			assert.Equal(t, []string{"cls", "jpg", "json"}, fieldNames(t, r.Fields()))
			require.NoError(t, CheckFieldNames(r.Fields()))
			assert.Equal(t, int64(11), r.(interface{ Samples() int64 }).Samples())
			assert.Empty(t, r.(interface{ Notes() []string }).Notes(), "folders are skipped quietly")
			got, err := readSamples(t, r)
			require.NoError(t, err)
			checkSamples(t, r.Fields(), append(a, c...), got)
			_, err = r.Next()
			assert.ErrorIs(t, err, io.EOF)
			require.NoError(t, r.Close())
			require.NoError(t, r.Close())
		})
	}
}

// TestWebDatasetKeys: a key is the path up to the first '.' of the base name, so a folder
// with a dot in its name and a multi-dot extension ("seg.png") split right; extensions are
// lower-cased; a path past 100 bytes (a PAX or GNU long name) is read whole; "./" prefixes
// are kept in the key.
func TestWebDatasetKeys(t *testing.T) {
	long := "very/" + string(bytes.Repeat([]byte("long-folder-name/"), 8)) + "000001"
	want := []wdsSample{
		{"train.v2/000001", map[string][]byte{"jpg": []byte("j1"), "seg.png": []byte("s1")}},
		{"train.v2/000002", map[string][]byte{"jpg": []byte("j2"), "seg.png": []byte("s2")}},
		{long, map[string][]byte{"jpg": []byte("j3"), "seg.png": []byte("s3")}},
		{"./000004", map[string][]byte{"jpg": []byte("j4"), "seg.png": []byte("s4")}},
	}
	items := itemsOf(want[:2])
	items = append(items,
		rawItem(long+".JPG", "", []byte("j3")), // lower-cased: field jpg
		rawItem(long+".seg.png", "", []byte("s3")),
		rawItem("./", "dir", nil),
		rawItem("./000004.jpg", "", []byte("j4")),
		rawItem("./000004.Seg.PNG", "", []byte("s4")))
	for _, format := range []string{"pax", "gnu"} {
		t.Run(format, func(t *testing.T) {
			paths := writeShards(t, t.TempDir(), format, []string{"s.tar"}, [][]wdsItem{items})
			r, err := OpenWebDataset(paths, false)
			require.NoError(t, err)
			defer r.Close()
			assert.Equal(t, []string{"jpg", "seg.png"}, fieldNames(t, r.Fields()))
			got, err := readSamples(t, r)
			require.NoError(t, err)
			checkSamples(t, r.Fields(), want, got)
		})
	}
}

// TestWebDatasetSkipsNonSamples: folders, links, metadata (__NAME__ at the top or as the first
// folder), hidden files (at the top or in a folder: .DS_Store, macOS's ._ files) and names
// without an extension are skipped, and Notes says so; "__meta__.json" is not metadata to
// webdataset (it does not end in "__") but key "__meta__".
func TestWebDatasetSkipsNonSamples(t *testing.T) {
	want := []wdsSample{
		{"d/000001", map[string][]byte{"cls": []byte("1"), "txt": []byte("one")}},
		{"d/000002", map[string][]byte{"cls": []byte("2"), "txt": []byte("two")}},
		{"__meta__", map[string][]byte{"cls": []byte("m"), "txt": []byte("meta")}},
	}
	items := []wdsItem{
		rawItem("__index__", "", []byte("an index")),
		rawItem("__info__/shard.json", "", []byte("{}")),
		rawItem(".DS_Store", "", []byte("junk")),
		rawItem("d", "dir", nil),
		rawItem("d/._000001.cls", "", []byte("apple double")),
		rawItem("d/000001.cls", "", []byte("1")),
		rawItem("d/000001.txt", "", []byte("one")),
		rawItem("d/README", "", []byte("read me")),
		rawItem("d/000002.cls", "", []byte("2")),
		rawItem("d/000002.txt", "", []byte("two")),
		rawItem("d/latest.cls", "symlink", nil),
		rawItem("__meta__.cls", "", []byte("m")),
		rawItem("__meta__.txt", "", []byte("meta")),
	}
	paths := writeShards(t, t.TempDir(), "pax", []string{"s.tar"}, [][]wdsItem{items})
	r, err := OpenWebDataset(paths, false)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []string{"cls", "txt"}, fieldNames(t, r.Fields()))
	got, err := readSamples(t, r)
	require.NoError(t, err)
	checkSamples(t, r.Fields(), want, got)
	assert.Equal(t, []string{`skipped 6 members, not webdataset sample files: ` +
		`1 not regular files ("d/latest.cls" in ` + paths[0] + `), ` +
		`2 metadata (__NAME__) ("__index__" in ` + paths[0] + `), ` +
		`2 hidden (.NAME) (".DS_Store" in ` + paths[0] + `), ` +
		`1 without an extension ("d/README" in ` + paths[0] + `)`}, r.(interface{ Notes() []string }).Notes())
}

// TestWebDatasetMissingFields: a sample without a field is refused at Open (naming the shard,
// the first sample lacking it, the field, how many lack it, and --fill-missing), or filled
// with an empty value. A field first seen after the first sample is missing from that one.
func TestWebDatasetMissingFields(t *testing.T) {
	want := []wdsSample{
		{"000000", map[string][]byte{"jpg": []byte("j0"), "cls": []byte("0")}},
		{"000001", map[string][]byte{"jpg": []byte("j1")}}, // no cls
		{"000002", map[string][]byte{"jpg": []byte("j2"), "cls": []byte("2")}},
		{"000003", map[string][]byte{"cls": []byte("3"), "json": []byte("{}")}}, // no jpg; json new
		{"000004", map[string][]byte{"jpg": []byte(""), "cls": []byte("4")}},    // an empty jpg is not missing
	}
	dir := t.TempDir()
	paths := writeShards(t, dir, "pax", []string{"a.tar", "b.tar"}, [][]wdsItem{itemsOf(want[:2]), itemsOf(want[2:])})

	_, err := OpenWebDataset(paths, false)
	require.Error(t, err)
	assert.Equal(t, paths[0]+`: sample "000001" has no "cls" member (1 of 5 samples lack one): pass --fill-missing to pack an empty cls for them, or fix the data`, err.Error())

	// Only json missing, from samples before its first: the first sample is named.
	only := []wdsSample{
		{"k0", map[string][]byte{"cls": []byte("0")}},
		{"k1", map[string][]byte{"cls": []byte("1"), "json": []byte("{}")}},
	}
	p2 := writeShards(t, t.TempDir(), "pax", []string{"c.tar"}, [][]wdsItem{itemsOf(only)})
	_, err = OpenWebDataset(p2, false)
	require.Error(t, err)
	assert.Equal(t, p2[0]+`: sample "k0" has no "json" member (1 of 2 samples lack one): pass --fill-missing to pack an empty json for them, or fix the data`, err.Error())

	r, err := OpenWebDataset(paths, true)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []string{"cls", "jpg", "json"}, fieldNames(t, r.Fields()))
	got, err := readSamples(t, r)
	require.NoError(t, err)
	checkSamples(t, r.Fields(), want, got)
}

// TestWebDatasetSplitSamples: a sample never spans shards (a key cut across two shards is two
// samples, each missing what the other has), and a key's members must be consecutive, as
// webdataset reads them: a key that comes back later in its shard is refused, with or without
// fill (filling would make two samples of one), naming the fix.
func TestWebDatasetSplitSamples(t *testing.T) {
	a := []wdsItem{
		sampleItem("000001", map[string][]byte{"cls": []byte("1"), "jpg": []byte("j1")}),
		rawItem("000002.cls", "", []byte("2")), // 000002's jpg is in the next shard
	}
	b := []wdsItem{
		rawItem("000002.jpg", "", []byte("j2")),
		rawItem("000003.cls", "", []byte("3")),
		rawItem("000004.cls", "", []byte("4")),
		rawItem("000004.jpg", "", []byte("j4")),
	}
	paths := writeShards(t, t.TempDir(), "pax", []string{"a.tar", "b.tar"}, [][]wdsItem{a, b})
	_, err := OpenWebDataset(paths, false)
	require.Error(t, err)
	assert.Equal(t, paths[1]+`: sample "000002" has no "cls" member (1 of 5 samples lack one): pass --fill-missing to pack an empty cls for them, or fix the data`, err.Error())

	r, err := OpenWebDataset(paths, true)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []string{"filled 3 empty values (--fill-missing) of 5 samples: cls 1, jpg 2"}, r.(interface{ Notes() []string }).Notes())
	got, err := readSamples(t, r)
	require.NoError(t, err)
	checkSamples(t, r.Fields(), []wdsSample{
		{"000001", map[string][]byte{"cls": []byte("1"), "jpg": []byte("j1")}},
		{"000002", map[string][]byte{"cls": []byte("2")}},
		{"000002", map[string][]byte{"jpg": []byte("j2")}},
		{"000003", map[string][]byte{"cls": []byte("3")}},
		{"000004", map[string][]byte{"cls": []byte("4"), "jpg": []byte("j4")}},
	}, got)

	// A key repeated where every sample is whole: two samples, as webdataset reads it.
	whole := []wdsItem{
		sampleItem("000007", map[string][]byte{"cls": []byte("7"), "jpg": []byte("j7")}),
		sampleItem("000008", map[string][]byte{"cls": []byte("8"), "jpg": []byte("j8")}),
		sampleItem("000007", map[string][]byte{"cls": []byte("7b"), "jpg": []byte("j7b")}),
	}
	wp := writeShards(t, t.TempDir(), "pax", []string{"w.tar"}, [][]wdsItem{whole})
	rw, err := OpenWebDataset(wp, false)
	require.NoError(t, err)
	gotWhole, err := readSamples(t, rw)
	require.NoError(t, err)
	rw.Close()
	require.Len(t, gotWhole, 3)

	b = append(b, rawItem("000003.jpg", "", []byte("j3"))) // 000003 again, not next to its cls
	paths = writeShards(t, t.TempDir(), "pax", []string{"a.tar", "b.tar"}, [][]wdsItem{a, b})
	for _, fill := range []bool{false, true} {
		_, err = OpenWebDataset(paths, fill)
		require.Error(t, err)
		assert.Equal(t, paths[1]+`: sample "000003" comes back at member "000003.jpg", after other samples: a sample's files must be next to each other in its shard (WebDataset's rule; a tar made in directory order, as `+"`tar -cf s.tar .`"+` makes it, lists them apart). Make the shard with sorted names (tar --sort=name -cf s.tar -C DIR .), or pack the folder itself (blockfs pack DIR OUT)`, err.Error(), "fill %v", fill)
	}
}

// TestWebDatasetOpenRefusals: what Open refuses, before any sample is read, in one line each.
func TestWebDatasetOpenRefusals(t *testing.T) {
	dir := t.TempDir()
	good := writeShards(t, dir, "pax", []string{"good.tar"}, [][]wdsItem{{
		sampleItem("000001", map[string][]byte{"cls": []byte("1"), "jpg": bytes.Repeat([]byte("j"), 5000)}),
		sampleItem("000002", map[string][]byte{"cls": []byte("2"), "jpg": bytes.Repeat([]byte("k"), 5000)}),
	}})[0]
	goodBytes, err := os.ReadFile(good)
	require.NoError(t, err)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	truncated := write("truncated.tar", goodBytes[:512+3000]) // in 000001.jpg's data
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(goodBytes)
	require.NoError(t, zw.Close())
	gzp := write("good.tar.gz", gz.Bytes())
	text := write("notes.tar", bytes.Repeat([]byte("not a tar file at all\n"), 40))
	ids := writeShards(t, dir, "pax", []string{"ids.tar"}, [][]wdsItem{{
		sampleItem("000001", map[string][]byte{"cls": []byte("1"), "ids": []byte("7")}),
	}})[0]
	dup := writeShards(t, dir, "pax", []string{"dup.tar"}, [][]wdsItem{{
		sampleItem("000001", map[string][]byte{"JPG": []byte("1"), "jpg": []byte("2")}),
	}})[0]
	badName := writeShards(t, dir, "pax", []string{"bad-name.tar"}, [][]wdsItem{{
		rawItem("000001.a b", "", []byte("x")),
	}})[0]
	onlyDirs := writeShards(t, dir, "pax", []string{"dirs.tar"}, [][]wdsItem{{
		rawItem("d", "dir", nil), rawItem("d/README", "", []byte("x")),
	}})[0]
	// A member header claiming 2 GiB (the data is never written).
	var huge bytes.Buffer
	tw := tar.NewWriter(&huge)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "000001.bin", Size: 2 << 30, Mode: 0o444, Typeflag: tar.TypeReg}))
	hugep := write("huge.tar", huge.Bytes())

	for _, c := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"no files", nil, "no WebDataset tar files given: give one or more"},
		{"missing", []string{good, filepath.Join(dir, "nope.tar")}, "cannot read " + filepath.Join(dir, "nope.tar") + ": no such file or directory"},
		{"folder", []string{dir}, dir + " is a folder, not a WebDataset tar file: give the files in it (a glob)"},
		{"truncated", []string{good, truncated}, truncated + `: at member "000001.jpg": the file ends early: the shard is damaged, compressed, or not a tar file; recreate it (or decompress it) or leave it out`},
		{"gzip", []string{gzp}, gzp + " is gzip-compressed: decompress it first (gunzip), then pack the .tar"},
		{"not a tar", []string{text}, text + ": at its start: archive/tar: invalid tar header: the shard is damaged"},
		{"a sidecar's name", []string{good, ids}, ids + `: member "000001.ids": field name "ids" is a sidecar's (epoch-NNNN.ids): rename the field in the input`},
		{"a name the mount cannot serve", []string{badName}, badName + `: member "000001.a b": field name "a b" cannot name a file of the mount`},
		{"duplicate", []string{dup}, dup + `: sample "000001" has two "jpg" members (field names are lower-cased): a sample has one value per field; rename or remove one`},
		{"no samples", []string{onlyDirs}, `the shards hold no samples (no member is a regular file named like KEY.EXTENSION; skipped 1 member, not webdataset sample files: 1 without an extension ("d/README" in ` + onlyDirs + `)): nothing to pack`},
		{"huge member", []string{hugep}, hugep + `: member "000001.bin" is 2.0 GiB (2147483648 bytes); a field's value may be at most 1.0 GiB: leave the sample out`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := OpenWebDataset(c.paths, true)
			require.Error(t, err)
			assert.Nil(t, r)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

// TestWebDatasetChangedAfterOpen: a shard rewritten between the scan and the read, with a field
// the scan did not see, or with fewer samples, is an error, not a wrong sample.
func TestWebDatasetChangedAfterOpen(t *testing.T) {
	dir := t.TempDir()
	two := [][]wdsItem{{
		sampleItem("000001", map[string][]byte{"cls": []byte("1")}),
		sampleItem("000002", map[string][]byte{"cls": []byte("2")}),
	}}
	paths := writeShards(t, dir, "pax", []string{"s.tar"}, two)
	r, err := OpenWebDataset(paths, false)
	require.NoError(t, err)
	writeShards(t, dir, "pax", []string{"s.tar"}, [][]wdsItem{{
		sampleItem("000001", map[string][]byte{"cls": []byte("1"), "txt": []byte("new")}),
	}})
	_, err = readSamples(t, r)
	require.Error(t, err)
	assert.Equal(t, paths[0]+`: member "000001.txt" has field "txt", which the scan did not see: did the shard change while being packed? Pack it again`, err.Error())
	r.Close()

	paths = writeShards(t, dir, "pax", []string{"s.tar"}, two)
	r, err = OpenWebDataset(paths, false)
	require.NoError(t, err)
	defer r.Close()
	writeShards(t, dir, "pax", []string{"s.tar"}, [][]wdsItem{two[0][:1]})
	_, err = readSamples(t, r)
	require.Error(t, err)
	assert.Equal(t, "the shards hold 1 samples, 2 when they were scanned: did they change while being packed? Pack them again", err.Error())
}

// TestWebDatasetNextReusesBuffers: a value is valid until the next Next; each field keeps
// one buffer.
func TestWebDatasetNextReusesBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	samples := imageNetLike(rng, 0, 4)
	for i := range samples { // the largest first, so that later ones fit its buffer
		samples[i].vals["jpg"] = randomBytes(rng, 100*(4-i))
	}
	paths := writeShards(t, t.TempDir(), "pax", []string{"s.tar"}, [][]wdsItem{itemsOf(samples)})
	r, err := OpenWebDataset(paths, false)
	require.NoError(t, err)
	defer r.Close()
	v, err := r.Next()
	require.NoError(t, err)
	first := &v[1][0] // jpg
	for range samples[1:] {
		v, err := r.Next()
		require.NoError(t, err)
		assert.Same(t, first, &v[1][0])
	}
}
