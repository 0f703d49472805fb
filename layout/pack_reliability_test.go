package layout

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// exchange is renameExchange as the package sets it.
var exchange = renameExchange

// TestFieldWriterEmptyValuesBounded: fields whose values are all empty are cut at blocks by
// their offsets, as a plain dataset is, whether written a sample or a column at a time: no
// block's files (data and offsets of every field) pass the block size by more than a sample.
// They were cut by the values' bytes alone, so 10^7 empty strings made one block of 80 MB of
// offsets per field, held in memory whole.
func TestFieldWriterEmptyValuesBounded(t *testing.T) {
	const n, block = 100000, 64 << 10
	fields := []Field{{Name: "a", Kind: Variable}, {Name: "b", Kind: Variable}, {Name: "label", Kind: Fixed, RecordSize: 1}}
	for _, columns := range []bool{false, true} {
		dst := filepath.Join(t.TempDir(), "ds")
		w, err := CreateFields(dst, fields, block, "test", false)
		require.NoError(t, err)
		if columns {
			for at := 0; at < n; at += 30000 {
				k := min(30000, n-at)
				require.NoError(t, w.AppendColumns(k, [][]byte{nil, nil, make([]byte, k)}, [][]uint64{make([]uint64, k), make([]uint64, k), nil}))
			}
		} else {
			for range n {
				require.NoError(t, w.Append([][]byte{nil, nil, {0}}))
			}
		}
		m, err := w.Commit()
		require.NoError(t, err)
		require.EqualValues(t, n, m.Records)
		var sizes []int64 // by block: the bytes of its files, every field cut at the samples
		for _, f := range m.Fields {
			if f.Own() {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(dst, f.Dir, ManifestName))
			require.NoError(t, err)
			man, err := ParseManifest(f.Name, raw)
			require.NoError(t, err)
			for b, e := range man.Blocks {
				if b == len(sizes) {
					sizes = append(sizes, 0)
				}
				sizes[b] += int64(e.Bytes)
				if e.OffsetsFile != "" {
					sizes[b] += 8 * int64(e.Records+1)
				}
			}
		}
		require.Greater(t, len(sizes), 10, "columns=%v: the empty values are cut at blocks", columns)
		for b, s := range sizes {
			require.LessOrEqual(t, s, int64(block+64), "columns=%v: block %d's files", columns, b)
		}
	}
}

// smallDataset writes a dataset of n variable records of one byte, v, at dst (with force).
func smallDataset(t *testing.T, dst string, n int, v byte, force bool) {
	t.Helper()
	w, err := Create(dst, WriterOptions{Kind: Variable, BlockSize: 4096}, force)
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, w.Append(uint64(i), []byte{v}))
	}
	_, err = w.Commit()
	require.NoError(t, err)
}

// TestWriterRemovesStale: what a killed writer left next to DST (its temporary directory, its
// lock file, the dataset it was replacing moved aside) is removed by the next writer of DST,
// and the dataset moved aside is put back where DST is missing; a live writer's temporary
// directory is left alone.
func TestWriterRemovesStale(t *testing.T) {
	parent := t.TempDir()
	dst := filepath.Join(parent, "ds")
	smallDataset(t, dst, 1, 0, false)
	// A killed writer's leftovers: nobody holds the lock.
	dead := filepath.Join(parent, ".ds.tmp-dead")
	require.NoError(t, os.MkdirAll(filepath.Join(dead, "blocks"), 0o755))
	require.NoError(t, os.WriteFile(dead+".lock", nil, 0o644))
	require.NoError(t, os.MkdirAll(dead+".old", 0o755))
	// A live writer of the same destination, and an older blockfs's directory (no lock file).
	live, err := Create(dst, WriterOptions{Kind: Variable, BlockSize: 4096}, true)
	require.NoError(t, err)
	require.NoError(t, live.Append(0, []byte("live")))
	legacy := filepath.Join(parent, ".ds.tmp-3k2j1")
	require.NoError(t, os.Mkdir(legacy, 0o755))

	smallDataset(t, dst, 3, 1, true)
	for _, p := range []string{dead, dead + ".lock", dead + ".old"} {
		_, err := os.Lstat(p)
		require.ErrorIs(t, err, os.ErrNotExist, "%s is removed", p)
	}
	require.DirExists(t, live.TempDir(), "a live writer's directory is left alone")
	require.DirExists(t, legacy)
	m, err := live.Commit()
	require.NoError(t, err, "the live writer finishes")
	require.EqualValues(t, 1, m.Records)
	left, err := filepath.Glob(filepath.Join(parent, ".ds.tmp-*"))
	require.NoError(t, err)
	require.Equal(t, []string{legacy}, left, "the writers leave nothing of theirs")

	// Killed between moving the old dataset aside and renaming the new one in (where the
	// filesystem cannot exchange them): the old one comes back.
	require.NoError(t, os.Rename(dst, dead+".old"))
	require.NoError(t, os.WriteFile(dead+".lock", nil, 0o644))
	removed, err := RemoveStale(dst)
	require.NoError(t, err)
	require.Equal(t, []string{dead}, removed)
	require.FileExists(t, filepath.Join(dst, ManifestName), "the dataset moved aside is back")

	// Put back by the next writer, before it looks at dst: without force it is kept.
	require.NoError(t, os.Rename(dst, dead+".old"))
	require.NoError(t, os.WriteFile(dead+".lock", nil, 0o644))
	_, err = Create(dst, WriterOptions{Kind: Variable, BlockSize: 4096}, false)
	require.ErrorIs(t, err, ErrExists)
	require.FileExists(t, filepath.Join(dst, ManifestName))
}

// TestForceNeverMissing: a reader that polls DST while pack --force replaces it again and
// again always finds a whole dataset there (the two are exchanged in one rename); where the
// filesystem refuses the exchange, the dataset is still replaced.
func TestForceNeverMissing(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "ds")
	smallDataset(t, dst, 1, 0, false)
	stop, missing := make(chan struct{}), make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				missing <- n
				return
			default:
			}
			if _, err := os.Lstat(filepath.Join(dst, ManifestName)); err != nil {
				n++
			}
		}
	}()
	for i := range 200 {
		smallDataset(t, dst, 1, byte(i), true)
	}
	close(stop)
	require.Zero(t, <-missing, "polls that found no dataset at %s", dst)

	renameExchange = func(a, b string) error { return &os.LinkError{Op: "renameat2", Old: a, New: b, Err: unix.EINVAL} }
	defer func() { renameExchange = exchange }()
	smallDataset(t, dst, 2, 7, true)
	raw, err := os.ReadFile(filepath.Join(dst, ManifestName))
	require.NoError(t, err)
	m, err := ParseManifest(dst, raw)
	require.NoError(t, err)
	require.EqualValues(t, 2, m.Records, "replaced without the exchange")
	left, err := filepath.Glob(filepath.Join(filepath.Dir(dst), ".ds.tmp-*"))
	require.NoError(t, err)
	require.Empty(t, left)
}

// TestFieldWriterBlockSamplesCapped: whatever the block size, a block cut at the samples holds
// at most blockSamplesCap samples (MaxBlockRecords: a variable field's block of more does not
// mount), by Append and by AppendColumns alike.
func TestFieldWriterBlockSamplesCapped(t *testing.T) {
	defer func(c int) { blockSamplesCap = c }(blockSamplesCap)
	blockSamplesCap = 1000
	fields := []Field{{Name: "text", Kind: Variable}, {Name: "label", Kind: Fixed, RecordSize: 4}}
	for _, columns := range []bool{false, true} {
		dst := filepath.Join(t.TempDir(), "ds")
		w, err := CreateFields(dst, fields, 1<<30, "test", false)
		require.NoError(t, err)
		const n = 4567
		if columns {
			for at := 0; at < n; at += 700 {
				k := min(700, n-at)
				require.NoError(t, w.AppendColumns(k, [][]byte{nil, make([]byte, 4*k)}, [][]uint64{make([]uint64, k), nil}))
			}
		} else {
			for range n {
				require.NoError(t, w.Append([][]byte{nil, {0, 0, 0, 0}}))
			}
		}
		m, err := w.Commit()
		require.NoError(t, err)
		require.EqualValues(t, n, m.Records)
		raw, err := os.ReadFile(filepath.Join(dst, m.Fields[0].Dir, ManifestName))
		require.NoError(t, err)
		man, err := ParseManifest("text", raw)
		require.NoError(t, err)
		require.Len(t, man.Blocks, 5, "columns %v", columns)
		for _, b := range man.Blocks {
			assert.LessOrEqual(t, b.Records, uint64(1000))
		}
	}
}

// TestStaleOfAnotherUser: leftovers beside DST that another user owns (in a folder others may
// write in, anyone can plant a lock file of a dead writer's name and a dataset moved aside)
// are not this user's to clean: they are left alone, and put back at a missing DST only when
// they are the folder's owner's.
func TestStaleOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to make files of another user's")
	}
	const other = 65534
	parent := t.TempDir()
	dst := filepath.Join(parent, "ds")
	planted := filepath.Join(parent, ".ds.tmp-planted")
	smallDataset(t, planted+".old", 2, 7, false)
	require.NoError(t, os.WriteFile(planted+".lock", nil, 0o644))
	for _, p := range []string{planted + ".lock", planted + ".old"} {
		require.NoError(t, os.Lchown(p, other, other))
	}
	removed, err := RemoveStale(dst)
	require.NoError(t, err)
	require.Empty(t, removed)
	require.NoDirExists(t, dst, "another user's dataset is not put at dst")
	require.FileExists(t, planted+".lock")

	// A lock of this user's beside a folder moved aside of another's (in a folder neither
	// owns): the folder is neither put back nor removed.
	require.NoError(t, os.Lchown(planted+".lock", 0, 0))
	removed, err = RemoveStale(dst)
	require.NoError(t, err)
	require.Empty(t, removed)
	require.NoDirExists(t, dst, "another user's dataset is not put at dst")
	require.DirExists(t, planted+".old", "nor removed")

	// In that user's own folder (root's pack replacing their dataset, killed midway), theirs
	// is put back.
	require.NoError(t, os.Chown(parent, other, other))
	removed, err = RemoveStale(dst)
	require.NoError(t, err)
	require.Equal(t, []string{planted}, removed)
	require.FileExists(t, filepath.Join(dst, ManifestName), "the folder's owner's dataset is back")
}
