package layout

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommitFailureLeavesNothing fails Commit at several of its steps, each time over an
// existing dataset with force, and checks that the error keeps its cause, the existing dataset
// is untouched and no temporary directory is left.
func TestCommitFailureLeavesNothing(t *testing.T) {
	cases := []struct {
		name     string
		names    bool             // keep names; one AddName only
		records  int              // 16-byte records to append, 4 to a block
		prep     func(tmp string) // runs on the temporary directory before the records
		is       error            // the cause, if the failure has one
		contains string
	}{
		{name: "no records", contains: "the input has no records: nothing to pack"},
		{name: "names short of records", names: true, records: 2, contains: "1 names for 2 records"},
		{name: "block file", records: 2, prep: func(tmp string) {
			require.NoError(t, os.WriteFile(filepath.Join(tmp, "blocks/000000.bin"), nil, 0o644))
		}, is: fs.ErrExist, contains: "000000.bin"},
		{name: "manifest", records: 6, prep: func(tmp string) {
			require.NoError(t, os.WriteFile(filepath.Join(tmp, ManifestName), nil, 0o644))
		}, is: fs.ErrExist, contains: ManifestName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			dst := filepath.Join(dir, "ds")
			writeFixed(t, dst, 10, 16, 64)
			before, err := os.ReadFile(filepath.Join(dst, ManifestName))
			require.NoError(t, err)

			w, err := Create(dst, WriterOptions{Kind: Fixed, RecordSize: 16, BlockSize: 64, Names: c.names}, true)
			require.NoError(t, err)
			if c.prep != nil {
				c.prep(w.TempDir())
			}
			if c.names {
				require.NoError(t, w.AddName("only"))
			}
			for i := 0; i < c.records; i++ {
				require.NoError(t, w.Append(uint64(i), make([]byte, 16)))
			}
			m, err := w.Commit()
			assert.Nil(t, m)
			require.ErrorContains(t, err, c.contains)
			if c.is != nil {
				assert.ErrorIs(t, err, c.is, "the cause is kept")
			}

			after, err := os.ReadFile(filepath.Join(dst, ManifestName))
			require.NoError(t, err)
			assert.Equal(t, before, after, "the existing dataset is untouched")
			ents, _ := os.ReadDir(dir)
			assert.Len(t, ents, 1, "no temporary directory left")
			_, err = w.Commit()
			assert.ErrorContains(t, err, "writer is closed")
		})
	}
}

// TestWriterKeepsFirstBackgroundError fails the background write of the first block and checks
// that every later call refuses with that error, Commit included, and that nothing is left.
func TestWriterKeepsFirstBackgroundError(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "ds")
	w, err := Create(dst, WriterOptions{Kind: Fixed, RecordSize: 16, BlockSize: 16}, false)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(w.TempDir(), "blocks/000000.bin"), nil, 0o644))
	rec := make([]byte, 16)
	// One record per block: the failure is seen within a few blocks (one queued, one being
	// written).
	var first error
	id := uint64(0)
	for ; id < 10 && first == nil; id++ {
		first = w.Append(id, rec)
	}
	require.ErrorIs(t, first, fs.ErrExist)
	assert.ErrorContains(t, first, "000000.bin")
	assert.Equal(t, first, w.Append(id, rec), "later records are refused with the first error")
	_, err = w.Commit()
	assert.Equal(t, first, err)
	_, err = os.Stat(dst)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	ents, _ := os.ReadDir(dir)
	assert.Empty(t, ents, "no temporary directory left")
}

// onlyReader hides every method of a reader but Read.
type onlyReader struct{ io.Reader }

// TestAppendFromCutsBlocksLikeAppend writes the same records with Append and with AppendFrom
// (records sure to be alone in their block go straight to their block file) and checks that
// both datasets are byte for byte the blocks the documented rule cuts.
func TestAppendFromCutsBlocksLikeAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var recs [][]byte
	for i := 0; i < 300; i++ {
		n := rng.IntN(30)
		if i%5 == 0 {
			n = 35 + rng.IntN(40) // around the 40 bytes above which a record is alone
		}
		rec := make([]byte, n)
		for j := range rec {
			rec[j] = byte(rng.Uint32())
		}
		recs = append(recs, rec)
	}
	cases := []struct {
		name string
		opt  WriterOptions
	}{
		{"variable", WriterOptions{Kind: Variable, BlockSize: 64, IDs: true}},
		{"fixed, one per block", WriterOptions{Kind: Fixed, RecordSize: 40, BlockSize: 64}},
		{"fixed, two per block", WriterOptions{Kind: Fixed, RecordSize: 30, BlockSize: 64}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := recs
			if c.opt.Kind == Fixed {
				in = nil
				for _, r := range recs {
					rec := make([]byte, c.opt.RecordSize)
					copy(rec, r)
					in = append(in, rec)
				}
			}
			// The rule of Append's doc comment, naively.
			var want [][]int // record indices of each block
			var size int64
			for i, r := range in {
				n := len(want)
				if c.opt.Kind == Fixed {
					if n == 0 || int64(len(want[n-1])) == c.opt.BlockSize/c.opt.RecordSize {
						want = append(want, nil)
						n++
					}
				} else if n == 0 || size+int64(len(r))+8*int64(len(want[n-1])+2) > c.opt.BlockSize {
					want, size = append(want, nil), 0
					n++
				}
				want[n-1] = append(want[n-1], i)
				size += int64(len(r))
			}
			dir := t.TempDir()
			var files []map[string][]byte
			for _, from := range []bool{false, true} {
				dst := filepath.Join(dir, fmt.Sprint(from))
				w, err := Create(dst, c.opt, false)
				require.NoError(t, err)
				for i, r := range in {
					if from {
						require.NoError(t, w.AppendFrom(uint64(i), onlyReader{bytes.NewReader(r)}, int64(len(r))))
					} else {
						require.NoError(t, w.Append(uint64(i), r))
					}
				}
				m, err := w.Commit()
				require.NoError(t, err)
				require.Len(t, m.Blocks, len(want))
				for b, idx := range want {
					var data []byte
					for _, i := range idx {
						data = append(data, in[i]...)
					}
					got, err := os.ReadFile(filepath.Join(dst, m.Blocks[b].File))
					require.NoError(t, err)
					require.Equal(t, data, got, "block %d", b)
					require.Equal(t, CRC32C(data), m.Blocks[b].CRC32C, "block %d", b)
				}
				all := map[string][]byte{}
				require.NoError(t, filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						all[p[len(dst):]], err = os.ReadFile(p)
					}
					return err
				}))
				files = append(files, all)
			}
			assert.Equal(t, files[0], files[1], "Append and AppendFrom write the same files")
		})
	}
}

// TestAppendFromShortRecord gives AppendFrom readers that end early: a record read into the
// block is not added and the writer goes on; a record copied to its own block file fails the
// writer, and nothing is left.
func TestAppendFromShortRecord(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(filepath.Join(dir, "ds"), WriterOptions{Kind: Variable, BlockSize: 64}, false)
	require.NoError(t, err)
	err = w.AppendFrom(0, strings.NewReader("short"), 10)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.NoError(t, w.AppendFrom(0, strings.NewReader("0123456789"), 10), "the writer goes on")
	err = w.AppendFrom(1, strings.NewReader("short"), 100)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.ErrorContains(t, err, "000001.bin: the record ended after 5 of its 100 bytes")
	assert.Equal(t, err, w.Append(1, []byte("x")), "later records are refused with the first error")
	_, cerr := w.Commit()
	assert.Equal(t, err, cerr)
	ents, _ := os.ReadDir(dir)
	assert.Empty(t, ents, "no temporary directory left")
}

// TestPackHonoursUmask: a dataset directory is made with 0777 less the umask, as mkdir(1)
// makes one, so a team's umask lets the team read it.
func TestPackHonoursUmask(t *testing.T) {
	for _, c := range []struct{ umask, want os.FileMode }{{0o022, 0o755}, {0o077, 0o700}, {0o002, 0o775}} {
		old := syscall.Umask(int(c.umask))
		dst := filepath.Join(t.TempDir(), "ds")
		writeFixed(t, dst, 10, 8, 64)
		syscall.Umask(old)
		st, err := os.Stat(dst)
		require.NoError(t, err)
		assert.Equal(t, c.want, st.Mode().Perm(), "umask %#o", c.umask)
	}
}
