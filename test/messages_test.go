package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusedInOneLine runs blockfs with args and checks it exits code with one line on stderr
// that holds every want, and no panic trace. A mount (args[0] "mount", its mountpoint last)
// runs with --daemon, so that one not refused returns, and is unmounted.
func refusedInOneLine(t *testing.T, code int, args []string, want ...string) {
	t.Helper()
	if args[0] == "mount" {
		args = append([]string{"mount", "--daemon"}, args[1:]...)
		mnt := args[len(args)-1]
		defer func() {
			if isMounted(mnt) {
				run(t, "unmount", mnt)
				t.Errorf("blockfs %v mounted", args)
			}
		}()
	}
	_, errs, got, _ := runWithin(t, 20*time.Second, args...)
	assert.Equal(t, code, got, "exit code of blockfs %v; stderr: %s", args, errs)
	assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
	assert.True(t, strings.HasPrefix(errs, "blockfs: "), errs)
	assert.NotContains(t, errs, "goroutine")
	for _, w := range want {
		assert.Contains(t, errs, w, "blockfs %v", args)
	}
}

// TestMissingFileInPlace: a file to serve in place (--record-size, --dtype) that does not
// exist, the commonest typo, is called missing, by name, by mount, info, order and a
// mixture's source, never "a dataset directory"; a near name in its folder is offered, and a
// missing folder is named. A dataset directory given --record-size still says what it is.
func TestMissingFileInPlace(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "train.bin")
	require.NoError(t, os.WriteFile(raw, make([]byte, 4096), 0o644))
	p := packRaw(t, 8, "64KiB")
	mnt := t.TempDir()
	typo := filepath.Join(dir, "trian.bin")
	gone := filepath.Join(dir, "nope", "train.bin")
	mix := filepath.Join(dir, "mix.json")
	require.NoError(t, os.WriteFile(mix, []byte(`{"sources": [{"data": "train.bin", "weight": 1, "options": {"record_size": 8}}, `+
		`{"data": "trian.bin", "weight": 1, "options": {"record_size": 8}}]}`), 0o644))
	notThere := " does not exist: --record-size serves an existing file in place; check the path"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"mount", "/nonexistent.bin", mnt, "--record-size", "4"}, []string{"blockfs: /nonexistent.bin" + notThere}},
		{[]string{"info", "/nonexistent.bin", "--record-size", "4"}, []string{"blockfs: /nonexistent.bin" + notThere}},
		{[]string{"order", "--ids", "/nonexistent.bin", "--record-size", "4"}, []string{"blockfs: /nonexistent.bin" + notThere}},
		{[]string{"info", typo, "--record-size", "8"}, []string{typo + notThere + " (did you mean " + raw + "?)"}},
		{[]string{"info", gone, "--record-size", "8"}, []string{gone + notThere + " (" + filepath.Dir(gone) + " does not exist either)"}},
		{[]string{"info", filepath.Join(dir, "TRAIN.bin"), "--dtype", "f4"}, []string{"TRAIN.bin does not exist: --dtype serves", "(did you mean " + raw + "?)"}},
		{[]string{"info", mix}, []string{"mix.json: source 1 (trian.bin): " + typo + notThere + " (did you mean " + raw + "?)"}},
		{[]string{"info", typo, "--window", "4"}, []string{typo + " does not exist: --window reads an existing file (.npy, raw) or dataset directory; check the path (did you mean " + raw + "?)"}},
		{[]string{"mount", mix, mnt}, []string{"mix.json: source 1 (trian.bin): " + typo + notThere}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			refusedInOneLine(t, 1, c.args, c.want...)
			assert.False(t, isMounted(mnt))
		})
	}
	refusedInOneLine(t, 2, []string{"info", p.dir, "--record-size", "8"}, "--record-size is for a file served in place; "+p.dir+" is a dataset directory")
}

// TestMixtureFileStrict: a mixture file is read as strictly as a dataset's manifest: a key
// twice (a second "sources" had served the other dataset), anywhere, or anything after the
// object (a second mixture pasted below the first) is refused by mount, info and order, in
// one line naming the key and where it is, and nothing is mounted; unknown keys stay refused.
// A manifest with a key twice is refused the same way.
func TestMixtureFileStrict(t *testing.T) {
	a, b := packRaw(t, 8, "64KiB"), packRaw(t, 8, "64KiB")
	dir := t.TempDir()
	mnt := t.TempDir()
	src := func(d string) string { return `{"data": "` + d + `", "weight": 1}` }
	good := `{"sources": [` + src(a.dir) + `]}`
	for _, c := range []struct{ name, doc, want string }{
		{"sources twice", `{"sources": [` + src(a.dir) + `], "sources": [` + src(b.dir) + `]}`,
			`has key "sources" twice in the top-level object (at byte `},
		{"data twice", `{"sources": [{"data": "` + a.dir + `", "weight": 1, "data": "` + b.dir + `"}]}`,
			`has key "data" twice in sources[0] (at byte `},
		{"an option twice", `{"sources": [{"data": "` + a.dir + `", "weight": 1, "options": {"seed": 1, "seed": 2}}]}`,
			`has key "seed" twice in sources[0].options (at byte `},
		{"a key twice but for case", `{"sources": [` + src(a.dir) + `], "Sources": [` + src(b.dir) + `]}`,
			`has key "Sources" twice in the top-level object`},
		{"a second object", good + "\n" + `{"sources": [` + src(b.dir) + `]}`,
			"has trailing data after the JSON value (at byte " + strconv.Itoa(len(good)+1) + "): a mixture file is one JSON object; remove what follows it"},
		{"unknown key", `{"sources": [` + src(a.dir) + `], "epochs": 3}`, `is not a mixture file: json: unknown field "epochs"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			mix := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			require.NoError(t, os.WriteFile(mix, []byte(c.doc), 0o644))
			for _, args := range [][]string{{"mount", mix, mnt}, {"info", mix}, {"order", "--ids", mix}} {
				refusedInOneLine(t, 2, args, "blockfs: "+mix+" "+c.want)
			}
			assert.False(t, isMounted(mnt))
		})
	}
	manifest := filepath.Join(a.dir, "blockfs.json")
	m, err := os.ReadFile(manifest)
	require.NoError(t, err)
	twice := strings.Replace(string(m), `"records": 8,`, `"records": 8, "records": 9,`, 1)
	require.NotEqual(t, string(m), twice)
	require.NoError(t, os.WriteFile(manifest, []byte(twice), 0o644))
	refusedInOneLine(t, 1, []string{"info", a.dir}, manifest+`: manifest has key "records" twice in the top-level object (at byte `, "; pack the dataset again")
}

// TestPackWebDatasetLink: blockfs pack of a WebDataset shard whose sample's jpg is a symbolic
// link (written by Python's tarfile) exits 1 in one line naming the member and what it is,
// and leaves nothing behind.
func TestPackWebDatasetLink(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "s.tar")
	sh(t, `cd `+dir+` && /usr/bin/python3 -c '
import io, tarfile
with tarfile.open("s.tar", "w") as tf:
    for n, d in [("0.cls", b"0"), ("0.jpg", b"j"), ("1.cls", b"1")]:
        ti = tarfile.TarInfo(n); ti.size = len(d); tf.addfile(ti, io.BytesIO(d))
    ti = tarfile.TarInfo("1.jpg"); ti.type = tarfile.SYMTYPE; ti.linkname = "/data/1.jpg"; tf.addfile(ti)
'`)
	out := filepath.Join(dir, "out")
	refusedInOneLine(t, 1, []string{"pack", "--format", "webdataset", shard, out},
		shard+`: sample "1": member "1.jpg" is a symbolic link (to "/data/1.jpg"); WebDataset members must be regular files: store the file it links to (tar --dereference), or remove the member`)
	_, err := os.Stat(out)
	assert.True(t, os.IsNotExist(err), "a failed pack leaves nothing")
}

// TestWebDatasetSamplesApart: shards made the common way (`tar -cf s.tar .` in directory
// order) may list a sample's files apart. GNU tar writes them so here (its files in the order
// given); pack, pack --fill-missing, index, index --fill-missing and a mount of the shards
// each refuse in one line naming the shard, the sample and the fix, never suggesting
// --fill-missing; the same files tarred with --sort=name pack and mount.
func TestWebDatasetSamplesApart(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache")) // the mount's automatic index
	src := filepath.Join(dir, "src")
	require.NoError(t, os.Mkdir(src, 0o755))
	var names []string
	for i := 0; i < 4; i++ {
		for _, ext := range []string{"jpg", "cls"} {
			name := fmt.Sprintf("s%04d.%s", i, ext)
			require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(name), 0o644))
		}
	}
	for _, ext := range []string{"jpg", "cls"} { // every jpg, then every cls
		for i := 0; i < 4; i++ {
			names = append(names, fmt.Sprintf("s%04d.%s", i, ext))
		}
	}
	apart, sorted := filepath.Join(dir, "apart"), filepath.Join(dir, "sorted")
	require.NoError(t, os.Mkdir(apart, 0o755))
	require.NoError(t, os.Mkdir(sorted, 0o755))
	sh(t, "cd "+src+" && tar -cf "+apart+"/s.tar "+strings.Join(names, " "))
	sh(t, "tar --sort=name -cf "+sorted+"/s.tar -C "+src+" .")
	shard := filepath.Join(apart, "s.tar")
	want := `s.tar: sample "s0000" comes back at member "s0000.cls", after other samples: a sample's files must be next to each other in its shard`
	for _, args := range [][]string{
		{"pack", "--format", "webdataset", shard, filepath.Join(dir, "p1")},
		{"pack", "--format", "webdataset", "--fill-missing", shard, filepath.Join(dir, "p2")},
		{"index", apart, filepath.Join(dir, "i1")},
		{"index", "--fill-missing", apart, filepath.Join(dir, "i2")},
		{"mount", apart, t.TempDir()},
	} {
		_, errs, code := run(t, args...)
		assert.NotEqual(t, 0, code, "blockfs %v", args)
		assert.Contains(t, errs, want, "blockfs %v", args)
		assert.Contains(t, errs, "tar --sort=name", "blockfs %v", args)
		assert.NotContains(t, errs, "pass --fill-missing", "blockfs %v", args)
		if args[0] != "mount" { // a mount says first that it indexes the shards
			assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
		}
	}
	for _, p := range []string{"p1", "p2", "i1", "i2"} {
		assert.NoFileExists(t, filepath.Join(dir, p, "blockfs.json"))
	}
	out := filepath.Join(dir, "ok")
	mustRun(t, "pack", "--format", "webdataset", sorted, out)
	m := mount(t, out, "--cache-size", "16MiB", "--readahead", "0")
	cls := fieldValues(t, m.path("epoch-0000.cls"), 0)
	ids := readIDs(t, m.path("epoch-0000.ids"))
	require.Len(t, cls, 4)
	for i, v := range cls {
		assert.Equal(t, fmt.Sprintf("s%04d.cls", ids[i]), string(v))
	}
}
