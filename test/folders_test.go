package test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pngBytes encodes a w x h grey PNG.
func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 37)
	}
	img.Set(0, 0, color.Gray{Y: uint8(w*16 + h)})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

// imageFolder writes an image folder as people have them: class folders of PNGs (one nested a
// level deeper), a PNG and a README at the top and a README in a class, and the leftovers of
// the Finder, Explorer, git, Jupyter, a Mac's zip and an editor. Each PNG's name says its size.
func imageFolder(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "images")
	files := map[string][]byte{
		"README.txt": []byte("images of animals\n"), "cat/README.txt": []byte("cats\n"),
		".DS_Store": []byte("\x00\x00\x00\x01Bud1"), "cat/.DS_Store": []byte("Bud1"),
		"cat/._001-4x3.png": []byte("\x00\x05\x16\x07AppleDouble"), "__MACOSX/cat/._001-4x3.png": []byte("\x00\x05\x16\x07"),
		"Thumbs.db": []byte("\xd0\xcf\x11\xe0"), "dog/Thumbs.db": []byte("\xd0\xcf\x11\xe0"),
		"desktop.ini": []byte("[.ShellClassInfo]\r\n"), "dog/004-7x1.png~": pngBytes(t, 7, 1),
		".git/HEAD": []byte("ref: refs/heads/main\n"), ".ipynb_checkpoints/006-3x3.png": pngBytes(t, 3, 3),
	}
	for _, p := range []struct {
		name string
		w, h int
	}{{"cat/001-4x3.png", 4, 3}, {"cat/002-5x3.png", 5, 3}, {"dog/sub/003-6x2.png", 6, 2}, {"dog/004-7x1.png", 7, 1},
		{"bird/005-2x9.png", 2, 9}, {"cover-8x8.png", 8, 8}} {
		files[p.name] = pngBytes(t, p.w, p.h)
	}
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, content, 0o644))
	}
	return root
}

// TestPackFolderAsPeopleHaveIt packs an image folder with junk in it (issue 25, part 6): the
// default pack skips the hidden files and folders and the junk and says so, --include '*.png'
// keeps only the images, and through the mounts (test/testdata/folder_checks.py) the labels of
// labels_from_names are ImageFolder's, decode(records, ids) gets each record's id, and a
// decode that fails names the files it failed on.
func TestPackFolderAsPeopleHaveIt(t *testing.T) {
	py := systemPython(t)
	root := imageFolder(t)
	all := filepath.Join(t.TempDir(), "all")
	out := mustRun(t, "pack", "--quiet", root, all)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 2, out)
	assert.Regexp(t, `^packed 8 files \([0-9.]+ [KMG]?i?B\) into 1 block of 256 KiB \(the data is small, and blocks are at least 256 KiB; --block-size to set\) at `+regexp.QuoteMeta(all)+`, pre-shuffled with seed 0, in `, lines[0])
	assert.Equal(t, "skipped 10 hidden or junk files and folders (.DS_Store, .git/, .ipynb_checkpoints/ and 7 more; --all-files keeps them)", lines[1])
	pngs := filepath.Join(t.TempDir(), "pngs")
	out = mustRun(t, "pack", "--quiet", "--include", "*.png", root, pngs)
	assert.Contains(t, out, "packed 6 files (")
	assert.Contains(t, out, "skipped 10 hidden or junk files and folders (.DS_Store, .git/, .ipynb_checkpoints/ and 7 more; --all-files keeps them), 2 by --include/--exclude\n")

	args := []string{"--cache-size", "8MiB", "--readahead", "64KiB"}
	mAll, mPNG := mount(t, all, args...), mount(t, pngs, args...)
	for _, c := range []struct {
		m    *mounted
		want []string
	}{
		{mAll, []string{"README.txt", "bird/005-2x9.png", "cat/001-4x3.png", "cat/002-5x3.png", "cat/README.txt", "cover-8x8.png", "dog/004-7x1.png", "dog/sub/003-6x2.png"}},
		{mPNG, []string{"bird/005-2x9.png", "cat/001-4x3.png", "cat/002-5x3.png", "cover-8x8.png", "dog/004-7x1.png", "dog/sub/003-6x2.png"}},
	} {
		names, err := os.ReadFile(c.m.path(".blockfs/names.txt"))
		require.NoError(t, err)
		assert.Equal(t, strings.Join(c.want, "\n")+"\n", string(names))
		ids, recs := epochRecords(t, c.m.dir, "epoch-0001")
		for i, id := range ids {
			want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(c.want[id])))
			require.NoError(t, err)
			assert.Equal(t, want, recs[i], c.want[id])
		}
	}
	// Labels as ImageFolder's rule both where torchvision is missing (hidden here) and, where
	// it is installed, against torchvision's own ImageFolder.
	out = pyCheckScriptEnv(t, append(os.Environ(), "PYTHONPATH="+hideModules(t, "torchvision")), py, "testdata/folder_checks.py", mAll.dir, mPNG.dir)
	assert.Contains(t, out, "labels as ImageFolder's rule (no torchvision)")
	t.Log(out)
	t.Run("torchvision", func(t *testing.T) {
		py := requirePython(t, "numpy", "torch", "torchvision")
		out := pyCheckScript(t, py, "testdata/folder_checks.py", mAll.dir, mPNG.dir)
		assert.Contains(t, out, "labels as torchvision's ImageFolder")
		t.Log(out)
	})
}

// TestPackCSVSkipHeader: a CSV's header is a record unless --skip-header, and pack says so;
// with it, record 0 is the first row, through a mount.
func TestPackCSVSkipHeader(t *testing.T) {
	rows := []string{"id,text,label"}
	for i := 0; i < 500; i++ {
		rows = append(rows, fmt.Sprintf("%d,\"row %d, quoted\",%d", i, i, i%7))
	}
	src := filepath.Join(t.TempDir(), "table.csv")
	require.NoError(t, os.WriteFile(src, []byte(strings.Join(rows, "\r\n")+"\r\n"), 0o644))
	dst := filepath.Join(t.TempDir(), "with-header")
	out, errs, code := run(t, "pack", "--quiet", src, dst)
	require.Zero(t, code, errs)
	assert.Equal(t, "note: the first line of table.csv looks like a header (\"id,text,label\"), and it was packed as record 0; --skip-header leaves it out\n", errs)
	assert.Contains(t, out, "packed 501 lines (")

	dst = filepath.Join(t.TempDir(), "rows")
	out, errs, code = run(t, "pack", "--quiet", "--skip-header", "--block-size", "4KiB", src, dst)
	require.Zero(t, code, errs)
	assert.Empty(t, errs)
	assert.Contains(t, out, "packed 500 lines (")
	assert.Regexp(t, `into \d+ blocks of 4\.0 KiB at `, out, "a block size given: no reason")
	want := make([][]byte, 500)
	for i := range want {
		want[i] = []byte(rows[i+1] + "\r") // a line's '\r' is kept
	}
	checkEpochs(t, dst, want, false)
}

// pyCheckScript runs a Python check script and returns its "ok ..." line.
func pyCheckScript(t *testing.T, py, script string, args ...string) string {
	t.Helper()
	return pyCheckScriptEnv(t, nil, py, script, args...)
}

// pyCheckScriptEnv is pyCheckScript in the environment env (nil: this process's).
func pyCheckScriptEnv(t *testing.T, env []string, py, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command(py, append([]string{script}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s%s", script, args, err, stdout.String(), stderr.String())
	}
	out := strings.TrimSpace(stdout.String())
	require.True(t, strings.HasPrefix(out, "ok"), out)
	return out
}
