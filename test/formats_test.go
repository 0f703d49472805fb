package test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// epochRecords reads an epoch of a mount the way a reader configures itself: record size from
// .blockfs/info.json, or boundaries from .offsets; ids from .ids. It returns the records in
// epoch order with their ids.
func epochRecords(t *testing.T, mnt, name string) ([]uint64, [][]byte) {
	t.Helper()
	var info struct {
		Kind       string `json:"kind"`
		RecordSize int64  `json:"record_size"`
	}
	b, err := os.ReadFile(filepath.Join(mnt, ".blockfs/info.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	data, err := os.ReadFile(filepath.Join(mnt, name))
	require.NoError(t, err)
	rawIDs, err := os.ReadFile(filepath.Join(mnt, name+".ids"))
	require.NoError(t, err)
	ids := make([]uint64, len(rawIDs)/8)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(rawIDs[8*i:])
	}
	var recs [][]byte
	if info.Kind == "fixed" {
		require.EqualValues(t, int64(len(ids))*info.RecordSize, len(data))
		for i := range ids {
			recs = append(recs, data[int64(i)*info.RecordSize:int64(i+1)*info.RecordSize])
		}
		return ids, recs
	}
	rawOffs, err := os.ReadFile(filepath.Join(mnt, name+".offsets"))
	require.NoError(t, err)
	require.Len(t, rawOffs, 8*(len(ids)+1))
	prev := uint64(0)
	for i := 1; i <= len(ids); i++ {
		o := binary.LittleEndian.Uint64(rawOffs[8*i:])
		recs = append(recs, data[prev:o])
		prev = o
	}
	require.EqualValues(t, len(data), prev)
	return ids, recs
}

// checkEpochs mounts dst and requires every record back, byte for byte, by id; with inOrder
// (a --no-shuffle pack mounted with --shuffle none) the ids must count up.
func checkEpochs(t *testing.T, dst string, want [][]byte, inOrder bool) *mounted {
	t.Helper()
	args := []string{"--cache-size", "8MiB", "--readahead", "1MiB"}
	if inOrder {
		args = append(args, "--shuffle", "none")
	}
	m := mount(t, dst, args...)
	for _, epoch := range []string{"epoch-0000", "epoch-0001"} {
		ids, recs := epochRecords(t, m.dir, epoch)
		require.Len(t, ids, len(want))
		seen := make([]bool, len(want))
		for i, id := range ids {
			require.Less(t, id, uint64(len(want)))
			require.False(t, seen[id], "id %d twice", id)
			seen[id] = true
			require.True(t, bytes.Equal(want[id], recs[i]), "%s: record %d (id %d) differs", epoch, i, id)
			if inOrder {
				require.EqualValues(t, i, id, "--no-shuffle with --shuffle none is input order")
			}
		}
	}
	return m
}

func packCLI(t *testing.T, src string, args ...string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "ds")
	mustRun(t, append(append([]string{"pack"}, args...), src, dst)...)
	return dst
}

func TestPackLinesAndMount(t *testing.T) {
	lines := []string{"{\"x\": 1}", "", "plain text", strings.Repeat("long ", 30000), "", "ünïcödé ✓"}
	for i := 0; i < 3000; i++ {
		lines = append(lines, fmt.Sprintf("{\"id\": %d, \"pad\": %q}", i, strings.Repeat("p", i%97)))
	}
	src := filepath.Join(t.TempDir(), "data.jsonl")
	require.NoError(t, os.WriteFile(src, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	want := make([][]byte, len(lines))
	for i, l := range lines {
		want[i] = []byte(l)
	}
	checkEpochs(t, packCLI(t, src, "--block-size", "64KiB"), want, false)
	checkEpochs(t, packCLI(t, src, "--block-size", "64KiB", "--no-shuffle"), want, true)
}

func TestPackFilesAndMount(t *testing.T) {
	root := filepath.Join(t.TempDir(), "images")
	names := []string{"cat/001.jpg", "cat/002.jpg", "dog/nested/deep/003.jpg", "dog/ü-ñ 空白.jpg", "empty.bin", "huge.bin", "readme.txt"}
	var want [][]byte
	for i, n := range names {
		content := []byte(fmt.Sprintf("file %d %s", i, strings.Repeat("z", i*37)))
		switch n {
		case "empty.bin":
			content = nil
		case "huge.bin":
			content = bytes.Repeat([]byte{0xAB}, 200<<10) // larger than the 64 KiB blocks
		}
		p := filepath.Join(root, filepath.FromSlash(n))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, content, 0o644))
		want = append(want, content)
	}
	for _, extra := range [][]string{{}, {"--no-shuffle"}} {
		dst := packCLI(t, root, append([]string{"--block-size", "64KiB"}, extra...)...)
		m := checkEpochs(t, dst, want, len(extra) > 0)
		got, err := os.ReadFile(m.path(".blockfs/names.txt"))
		require.NoError(t, err)
		assert.Equal(t, strings.Join(names, "\n")+"\n", string(got), "names sidecar, line i names id i")
		assert.Equal(t, string(got), mustRun(t, "info", "--names", dst))
	}
}

// npyFile writes a version-1.0 .npy file.
func npyFile(t *testing.T, dir, dict string, data []byte) string {
	t.Helper()
	hdr := dict
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	require.NoError(t, binary.Write(&b, binary.LittleEndian, uint16(len(hdr))))
	b.WriteString(hdr)
	b.Write(data)
	p := filepath.Join(dir, "array.npy")
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p
}

func TestPackNpyAndMountInPlace(t *testing.T) {
	const n, rowBytes = 5000, 2 * 3 * 4
	data := make([]byte, n*rowBytes)
	for i := range data {
		data[i] = byte(i * 7)
	}
	src := npyFile(t, t.TempDir(), "{'descr': '<f4', 'fortran_order': False, 'shape': (5000, 2, 3), }", data)
	want := make([][]byte, n)
	for i := range want {
		want[i] = data[i*rowBytes : (i+1)*rowBytes]
	}
	dst := packCLI(t, src, "--block-size", "4KiB")
	m := checkEpochs(t, dst, want, false)
	var info map[string]any
	b, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &info))
	assert.Equal(t, "<f4", info["dtype"])
	assert.Equal(t, []any{2.0, 3.0}, info["shape"])
	assert.Contains(t, mustRun(t, "info", dst), "[2 3] per record")

	// The same .npy served in place, and a raw file with --record-size: no copy, same tree.
	inPlace := mount(t, src, "--block-size", "4KiB", "--cache-size", "8MiB", "--readahead", "1MiB")
	ids, recs := epochRecords(t, inPlace.dir, "epoch-0003")
	for i, id := range ids {
		require.Equal(t, want[id], recs[i])
	}
	b, err = os.ReadFile(inPlace.path(".blockfs/info.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"in_place"`)
	// The mount point may sit next to the file it serves.
	rawDir := t.TempDir()
	raw := filepath.Join(rawDir, "features.bin")
	require.NoError(t, os.WriteFile(raw, data, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(rawDir, "mnt"), 0o755))
	rawMount := mountAt(t, raw, filepath.Join(rawDir, "mnt"), "--record-size", "24", "--block-size", "4KiB", "--cache-size", "8MiB", "--readahead", "1MiB", "--shuffle", "none")
	ids, recs = epochRecords(t, rawMount.dir, "epoch-0000")
	for i, id := range ids {
		require.EqualValues(t, i, id)
		require.Equal(t, want[id], recs[i])
	}
}

func TestSingleRecordDataset(t *testing.T) {
	src := filepath.Join(t.TempDir(), "one.txt")
	require.NoError(t, os.WriteFile(src, []byte("only line"), 0o644))
	checkEpochs(t, packCLI(t, src), [][]byte{[]byte("only line")}, false)
}

func TestVerify(t *testing.T) {
	p := packRaw(t, 400, "64KiB") // 16 records per block
	out := mustRun(t, "verify", p.dir)
	assert.Contains(t, out, "ok: 25 blocks")
	f, err := os.OpenFile(filepath.Join(p.dir, "blocks/000007.bin"), os.O_RDWR, 0)
	require.NoError(t, err)
	var one [1]byte
	_, err = f.ReadAt(one[:], 1234)
	require.NoError(t, err)
	one[0] ^= 0x01
	_, err = f.WriteAt(one[:], 1234)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, errs, code := run(t, "verify", p.dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "blocks/000007.bin: block 7: CRC32C is")
	assert.Contains(t, errs, "1 problem(s) in 25 blocks")

	// mount --verify: the damaged block's range is EIO, the rest reads.
	m := mount(t, p.dir, "--verify", "--shuffle", "none", "--cache-size", "4MiB", "--readahead", "0")
	ef, err := os.Open(m.path("epoch-0000"))
	require.NoError(t, err)
	defer ef.Close()
	buf := make([]byte, 4096)
	_, err = ef.ReadAt(buf, 7*16*4096+100)
	assert.ErrorIs(t, err, syscall.EIO)
	_, err = ef.ReadAt(buf, 6*16*4096)
	assert.NoError(t, err)
	ids, err := os.ReadFile(m.path("epoch-0000.ids"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(p.records[binary.LittleEndian.Uint64(ids[8*6*16:])], buf), "an intact block reads its records")
	_, err = ef.ReadAt(buf, 8*16*4096)
	assert.NoError(t, err)

	// verify of the mount point checks the dataset it serves, as info and order take it.
	_, errs, code = run(t, "verify", m.dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "blocks/000007.bin: block 7: CRC32C is")
	assert.Contains(t, errs, p.dir+": 1 problem(s) in 25 blocks")
	raw := filepath.Join(t.TempDir(), "raw.bin")
	require.NoError(t, os.WriteFile(raw, make([]byte, 64*4096), 0o644))
	mr := mount(t, raw, "--record-size", "4096", "--cache-size", "4MiB", "--readahead", "0")
	_, errs, code = run(t, "verify", mr.dir)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "which is not a dataset blockfs packed or indexed: there are no checksums to verify")
}

func TestPackRefusals(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "odd.bin")
	require.NoError(t, os.WriteFile(odd, make([]byte, 1000), 0o644))
	truncated := npyFile(t, t.TempDir(), "{'descr': '<f4', 'fortran_order': False, 'shape': (100, 3), }", make([]byte, 1000))
	fortran := npyFile(t, t.TempDir(), "{'descr': '<f4', 'fortran_order': True, 'shape': (10, 3), }", make([]byte, 120))
	dangling := filepath.Join(dir, "dangling.txt")
	require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), dangling))
	existing := filepath.Join(dir, "existing")
	require.NoError(t, os.Mkdir(existing, 0o755))
	unknown := filepath.Join(dir, "data.orc") // a format pack does not read
	require.NoError(t, os.WriteFile(unknown, []byte("PAR1"), 0o644))
	shortParquet := filepath.Join(dir, "data.parquet")
	require.NoError(t, os.WriteFile(shortParquet, []byte("PAR1"), 0o644))
	lines := filepath.Join(dir, "ok.txt")
	require.NoError(t, os.WriteFile(lines, []byte("a\nb\n"), 0o644))
	headerOnly := filepath.Join(dir, "header.csv")
	require.NoError(t, os.WriteFile(headerOnly, []byte("id,label\n"), 0o644))
	tree := filepath.Join(t.TempDir(), "tree")
	require.NoError(t, os.MkdirAll(filepath.Join(tree, ".git"), 0o755))
	for _, name := range []string{"a.png", ".DS_Store", ".git/HEAD"} {
		require.NoError(t, os.WriteFile(filepath.Join(tree, name), []byte("x"), 0o644))
	}
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--format", "raw", "--record-size", "64", odd, out}, 1, "not a multiple of the record size 64 (40 bytes left over)"},
		{[]string{truncated, out}, 1, "truncated or damaged"},
		{[]string{fortran, out}, 1, "Fortran order"},
		{[]string{dangling, out}, 1, "cannot read the input"},
		{[]string{"--format", "raw", "--record-size", "8", dir, out}, 1, "is not a regular file"},
		{[]string{lines, existing}, 1, "already exists (use --force"},
		{[]string{unknown, out}, 1, "give --format"},
		{[]string{shortParquet, out}, 1, "too few for a Parquet file"},
		{[]string{"--format", "csv", lines, out}, 2, "unknown format"},
		{[]string{"--record-size", "8", lines, out}, 1, "does not apply to lines input"},
		{[]string{"--include", "[a-", tree, out}, 2, `--include: pattern "[a-" is not a glob`},
		{[]string{"--exclude", "*.png", lines, out}, 1, "--include, --exclude and --all-files choose the files of a folder; " + lines + " is lines input"},
		{[]string{"--skip-header", tree, out}, 1, "--skip-header is for lines input (CSV, TSV, JSON Lines, text); " + tree + " is files input"},
		{[]string{"--skip-header", headerOnly, out}, 1, "has no lines after its header (--skip-header): nothing to pack"},
		{[]string{"--include", "*.jpg", tree, out}, 1, tree + " holds no files to pack: skipped 2 hidden or junk files and folders (.DS_Store, .git/; --all-files keeps them), 1 by --include/--exclude"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, errs, code := run(t, append([]string{"pack"}, c.args...)...)
			assert.Equal(t, c.code, code, errs)
			assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
			assert.Contains(t, errs, c.msg)
			_, err := os.Stat(out)
			assert.True(t, os.IsNotExist(err), "nothing left behind")
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				assert.False(t, strings.HasPrefix(e.Name(), ".out.tmp"), "temporary %s left behind", e.Name())
			}
		})
	}
	ents, err := os.ReadDir(existing)
	require.NoError(t, err)
	assert.Empty(t, ents, "an existing DST is untouched without --force")
}

// TestPackInterrupted: SIGINT during a pack exits non-zero with one line and leaves nothing,
// neither a dataset nor a temporary directory; an existing dataset replaced with --force
// survives intact.
func TestPackInterrupted(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "big.bin")
	f, err := os.Create(src)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30)) // sparse: reads fast, packs for seconds
	require.NoError(t, f.Close())
	existing := packRaw(t, 10, "64KiB")
	manifest, err := os.ReadFile(filepath.Join(existing.dir, "blockfs.json"))
	require.NoError(t, err)
	for _, dst := range []string{filepath.Join(dir, "new"), existing.dir} {
		cmd := exec.Command(bin, "pack", "--force", "--record-size", "4KiB", src, dst)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		time.Sleep(300 * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		err := cmd.Wait()
		require.Error(t, err, "an interrupted pack exits non-zero")
		assert.Equal(t, "blockfs: interrupted: nothing was written\n", stderr.String())
		parent := filepath.Dir(dst)
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			assert.NotContains(t, e.Name(), ".tmp-", "temporary directory left in %s", parent)
		}
	}
	_, err = os.Stat(filepath.Join(dir, "new"))
	assert.True(t, os.IsNotExist(err))
	after, err := os.ReadFile(filepath.Join(existing.dir, "blockfs.json"))
	require.NoError(t, err)
	assert.Equal(t, manifest, after)
	mustRun(t, "verify", existing.dir)
}
