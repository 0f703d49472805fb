package pack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern, rel string
		dir, want    bool
	}{
		// Without '/': the name, at any depth.
		{"*.png", "a.png", false, true},
		{"*.png", "cat/sub/a.png", false, true},
		{"*.png", "cat/a.jpg", false, false},
		{"*.PNG", "cat/a.png", false, false}, // case matters
		{"README*", "cat/README.txt", false, true},
		{"val", "val", true, true},
		{"val", "x/val", true, true},
		// With '/': the path relative to the folder.
		{"cat/*.png", "cat/a.png", false, true},
		{"cat/*.png", "x/cat/a.png", false, false},
		{"cat/*.png", "cat/sub/a.png", false, false},
		{"cat/**", "cat/sub/a.png", false, true},
		{"cat/**", "cat", true, false}, // inside the folder, not the folder
		{"*/**", "cat/a.png", false, true},
		{"*/**", "README.txt", false, false}, // top-level files are in no folder
		{"**/*.png", "a.png", false, true},
		{"**/*.png", "a/b/c/d.png", false, true},
		{"a/**/d.png", "a/d.png", false, true},
		{"a/**/d.png", "a/b/c/d.png", false, true},
		{"a/**/d.png", "x/a/d.png", false, false},
		{"**", "anything/at/all", false, true},
		{"/README.txt", "README.txt", false, true}, // a leading '/' anchors at the folder
		{"/README.txt", "cat/README.txt", false, false},
		{"./cat/*", "cat/a.png", false, true},
		// A trailing '/': folders only.
		{"tmp/", "tmp", true, true},
		{"tmp/", "tmp", false, false},
		{"x/tmp/", "x/tmp", true, true},
		// Escapes and classes.
		{`\*.png`, "*.png", false, true},
		{`\*.png`, "a.png", false, false},
		{"[ab].png", "b.png", false, true},
	} {
		p, err := parsePattern(c.pattern)
		require.NoError(t, err, c.pattern)
		name := c.rel[strings.LastIndex(c.rel, "/")+1:]
		assert.Equal(t, c.want, p.match(c.rel, name, c.dir), "%q against %q (dir %v)", c.pattern, c.rel, c.dir)
	}
	for _, bad := range []string{"[", "a/[/b", "", "/", "a//b"} {
		_, err := parsePattern(bad)
		assert.Error(t, err, "%q", bad)
	}
	assert.ErrorContains(t, Options{Include: []string{"ok", "[x"}}.Validate(), `--include: pattern "[x" is not a glob`)
	assert.ErrorContains(t, Options{Exclude: []string{""}}.Validate(), `--exclude: pattern "" matches nothing`)
	assert.NoError(t, Options{Include: []string{"*.png", "cat/**"}, Exclude: []string{"tmp/"}}.Validate())
}

// junkTree writes a folder of images as people have them: class folders, a README at the top
// and in a class, the Finder's, Explorer's and git's leftovers, a backup and a symlink.
func junkTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "images")
	for _, rel := range []string{
		"cat/001.png", "cat/002.png", "cat/README.txt", "dog/sub/003.png", "README.txt",
		".DS_Store", "cat/.DS_Store", "cat/._001.png", "Thumbs.db", "dog/desktop.ini", "dog/003.png~",
		".git/objects/ab/cdef", ".ipynb_checkpoints/004.png", "__MACOSX/cat/._001.png",
	} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("bytes of "+rel), 0o644))
	}
	require.NoError(t, os.Symlink("cat/001.png", filepath.Join(root, "link.png")))
	return root
}

func TestFilesSkipJunk(t *testing.T) {
	root := junkTree(t)
	for _, c := range []struct {
		name string
		opt  Options
		want []string
		skip Skipped
		line string
	}{
		{"default", Options{},
			[]string{"README.txt", "cat/001.png", "cat/002.png", "cat/README.txt", "dog/sub/003.png"},
			Skipped{Junk: 9, Special: 1, Examples: []string{".DS_Store", ".git/", ".ipynb_checkpoints/"}},
			"skipped 9 hidden or junk files and folders (.DS_Store, .git/, .ipynb_checkpoints/ and 6 more; --all-files keeps them), 1 symlink or special file (not followed)"},
		{"include png", Options{Include: []string{"*.png"}},
			[]string{"cat/001.png", "cat/002.png", "dog/sub/003.png"},
			Skipped{Junk: 9, Filtered: 2, Special: 1, Examples: []string{".DS_Store", ".git/", ".ipynb_checkpoints/"}}, ""},
		{"inside folders, not sub", Options{Include: []string{"*/**"}, Exclude: []string{"sub/", "README*"}},
			[]string{"cat/001.png", "cat/002.png"},
			Skipped{Junk: 9, Filtered: 3, Special: 1, Examples: []string{".DS_Store", ".git/", ".ipynb_checkpoints/"}}, ""},
		{"all files", Options{AllFiles: true, Exclude: []string{".git"}},
			[]string{".DS_Store", ".ipynb_checkpoints/004.png", "README.txt", "Thumbs.db", "__MACOSX/cat/._001.png",
				"cat/.DS_Store", "cat/._001.png", "cat/001.png", "cat/002.png", "cat/README.txt",
				"dog/003.png~", "dog/desktop.ini", "dog/sub/003.png"},
			Skipped{Filtered: 1, Special: 1}, "skipped 1 by --include/--exclude, 1 symlink or special file (not followed)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "ds")
			res, err := Pack(context.Background(), root, dst, c.opt)
			require.NoError(t, err)
			recs, names := readBack(t, dst)
			assert.Equal(t, c.want, names)
			for i, n := range names {
				assert.Equal(t, "bytes of "+n, string(recs[uint64(i)]), n)
			}
			assert.Equal(t, c.skip, res.Skipped)
			if c.line != "" {
				assert.Equal(t, c.line, res.Skipped.String())
			}
		})
	}

	// Nothing left: the error says what was skipped and why.
	_, err := Pack(context.Background(), root, filepath.Join(t.TempDir(), "ds"), Options{Include: []string{"*.jpg"}})
	assert.ErrorContains(t, err, "holds no files to pack: skipped 9 hidden or junk files and folders")
	assert.ErrorContains(t, err, "5 by --include/--exclude")
	// The folder packed may itself be hidden, or ".".
	hidden := filepath.Join(t.TempDir(), ".data")
	require.NoError(t, os.MkdirAll(hidden, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hidden, "a"), []byte("a"), 0o644))
	res, err := Pack(context.Background(), hidden, filepath.Join(t.TempDir(), "ds"), Options{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, res.Manifest.Records)
	// A name pack cannot store (a newline) is no trouble when it is skipped.
	require.NoError(t, os.WriteFile(filepath.Join(hidden, ".bad\nname"), []byte("x"), 0o644))
	_, err = Pack(context.Background(), hidden, filepath.Join(t.TempDir(), "ds"), Options{})
	require.NoError(t, err)
	_, err = Pack(context.Background(), hidden, filepath.Join(t.TempDir(), "ds"), Options{AllFiles: true})
	assert.ErrorContains(t, err, "contains a newline; rename the file, or leave it out with --exclude")
	// Folder options on other inputs are refused.
	txt := filepath.Join(t.TempDir(), "a.txt")
	require.NoError(t, os.WriteFile(txt, []byte("a\n"), 0o644))
	_, err = Pack(context.Background(), txt, filepath.Join(t.TempDir(), "ds"), Options{Include: []string{"*.png"}})
	assert.ErrorContains(t, err, "--include, --exclude and --all-files choose the files of a folder; "+txt+" is lines input")
}

func TestSkipHeader(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "table.csv")
	require.NoError(t, os.WriteFile(src, []byte("id,text,label\n0,hello,3\n1,\"bye, now\",4\n2,x,5"), 0o644))
	packBoth(t, src, Options{SkipHeader: true, BlockSize: 4096, BucketBytes: 10}, func(t *testing.T, dst string) {
		recs, _ := readBack(t, dst)
		assert.Equal(t, map[uint64][]byte{0: []byte("0,hello,3"), 1: []byte("1,\"bye, now\",4"), 2: []byte("2,x,5")}, recs)
	})
	res, err := Pack(context.Background(), src, filepath.Join(dir, "with"), Options{})
	require.NoError(t, err)
	assert.EqualValues(t, 4, res.Manifest.Records, "without --skip-header the header is record 0")
	assert.Equal(t, []string{`the first line of table.csv looks like a header ("id,text,label"), and it was packed as record 0; --skip-header leaves it out`}, res.Notes)
	res, err = Pack(context.Background(), src, filepath.Join(dir, "without"), Options{SkipHeader: true})
	require.NoError(t, err)
	assert.Empty(t, res.Notes)

	// A header longer than the read buffer is skipped whole; errors count it as line 1.
	long := filepath.Join(dir, "long.txt")
	require.NoError(t, os.WriteFile(long, []byte(strings.Repeat("h", readBuffer+10)+"\nfirst\nsecond\n"), 0o644))
	in, _, err := openLines(long, true, false)
	require.NoError(t, err)
	defer in.close()
	rec, err := in.next()
	require.NoError(t, err)
	assert.Equal(t, "first", string(rec.b))
	assert.Equal(t, "line 2 of "+long, in.describe(0))
	assert.EqualValues(t, len("first\nsecond\n"), in.size())

	only := filepath.Join(dir, "only.csv")
	require.NoError(t, os.WriteFile(only, []byte("id,text\n"), 0o644))
	_, err = Pack(context.Background(), only, filepath.Join(dir, "ds"), Options{SkipHeader: true})
	assert.ErrorContains(t, err, "has no lines after its header (--skip-header): nothing to pack")
	npy := writeNpy(t, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", make([]byte, 8))
	_, err = Pack(context.Background(), npy, filepath.Join(dir, "ds"), Options{SkipHeader: true})
	assert.ErrorContains(t, err, "--skip-header is for lines input (CSV, TSV, JSON Lines, text); "+npy+" is npy input")
}

func TestLooksLikeHeader(t *testing.T) {
	for _, c := range []struct {
		first, second string
		sep           byte
		want          bool
	}{
		{"id,text,label", "0,hello,3", ',', true},
		{`"id", "x"`, `1, 2.5`, ',', true},
		{"id,text,label", `0,"hello, world",3`, ',', true}, // a quoted separator
		{"label", "3", ',', true},
		{"id\tvalue", "7\t-1e3", '\t', true},
		{"0,hello,3", "1,bye,4", ',', false},     // data, not a header
		{"name,city", "bob,paris", ',', false},   // text only: cannot tell
		{"id,text,label", "0,hello", ',', false}, // fields disagree
		{"id,,label", "0,x,3", ',', false},       // an empty name
		{"id,2020,label", "0,x,3", ',', false},   // a number in the first line
		{"x,y", "a,b", ',', false},
	} {
		assert.Equal(t, c.want, looksLikeHeader(c.first, c.second, c.sep), "%q / %q", c.first, c.second)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{
		"a.csv": "id,v\n1,2\n", "b.tsv": "id\tv\r\n1\t2\r\n", "c.txt": "id,v\n1,2\n", "d.csv": "id,v\n", "e.csv": "1,2\n3,4\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	assert.Contains(t, headerNote(filepath.Join(dir, "a.csv")), `a.csv looks like a header ("id,v")`)
	assert.Contains(t, headerNote(filepath.Join(dir, "b.tsv")), `b.tsv looks like a header ("id\tv")`)
	for _, name := range []string{"c.txt", "d.csv", "e.csv", "missing.csv"} {
		assert.Empty(t, headerNote(filepath.Join(dir, name)), name)
	}
}

func TestAutoBlockReason(t *testing.T) {
	assert.Equal(t, "the default", autoBlockReason(1<<40, 0))
	assert.Equal(t, "chosen for at least 64 blocks", autoBlockReason(47_040_000, 784))
	assert.Equal(t, "the data is small, and blocks are at least 256 KiB", autoBlockReason(1<<20, 0))
	assert.Equal(t, "one record each: a block holds at least one record", autoBlockReason(10<<20, 1<<20))
}
