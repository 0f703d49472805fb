package pack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFilesSwappedAfterListing: a listed file that someone replaces with a symlink (to a file
// of the packing user's) or a FIFO before pack reads it is refused with the reason, never
// followed, waited on or copied into the dataset; the files around it read as listed.
func TestFilesSwappedAfterListing(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("the packing user's secret"), 0o600))
	for _, swap := range []string{"symlink", "fifo"} {
		t.Run(swap, func(t *testing.T) {
			root := t.TempDir()
			for _, name := range []string{"a", "b", "c"} {
				require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte("record "+name), 0o644))
			}
			sel, err := newSelection(Options{})
			require.NoError(t, err)
			in, _, err := openFiles(root, sel)
			require.NoError(t, err)
			defer in.close()
			b := filepath.Join(root, "b")
			require.NoError(t, os.Remove(b))
			if swap == "symlink" {
				require.NoError(t, os.Symlink(secret, b))
			} else {
				require.NoError(t, syscall.Mkfifo(b, 0o644))
			}
			r, err := in.next()
			require.NoError(t, err)
			require.Equal(t, "record a", string(recordBytes(t, r)))
			_, err = in.next()
			require.Error(t, err, "the swapped file is refused")
			require.Contains(t, err.Error(), b)
		})
	}
}

// TestFilesParentSwappedAfterListing: a folder on a listed file's path that someone replaces
// with a symlink (to a folder of the packing user's holding a file of the same name) or with
// a file before pack reads it is refused in one line naming the file and the folder, never
// followed: nothing of the folder it points at reaches the dataset. (internal/userfile's
// TestOpenBeneath checks the walk that stands in for openat2 on a kernel without it.)
func TestFilesParentSwappedAfterListing(t *testing.T) {
	private := t.TempDir()
	secret := []byte("the packing user's secret")
	require.NoError(t, os.Mkdir(filepath.Join(private, "deep"), 0o700))
	for _, name := range []string{"a.bin", "deep/a.bin"} { // all that a pack through sub would take
		require.NoError(t, os.WriteFile(filepath.Join(private, name), secret, 0o600))
	}
	for _, c := range []struct{ swap, target, file string }{
		{"sub", private, "sub/a.bin"},
		{"sub/deep", private, "sub/deep/a.bin"},
		{"sub", "", "sub/a.bin"},
		{"sub/a.bin", filepath.Join(private, "a.bin"), "sub/a.bin"},
	} {
		to := "a symlink"
		if c.target == "" {
			to = "a file"
		}
		t.Run(c.swap+" to "+to, func(t *testing.T) {
			out := t.TempDir()
			root, err := packSwapped(t, out, c.swap, c.target)
			require.Error(t, err, "the file is refused")
			file := filepath.Join(root, filepath.FromSlash(c.file))
			want := fmt.Sprintf("cannot read %s: its folder %s changed after it was listed (it is no longer a folder: a symlink or another file); pack the folder again once it stops changing",
				file, filepath.Join(root, filepath.FromSlash(c.swap)))
			if c.swap == c.file {
				want = fmt.Sprintf("cannot read %s: it became a symlink after it was listed; pack the folder again once it stops changing", file)
			}
			require.Equal(t, want, err.Error())
			require.NoError(t, filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				require.False(t, bytes.Contains(b, secret), "%s holds the secret", p)
				return nil
			}))
		})
	}
}

// packSwapped lists a folder holding a, sub/a.bin, sub/deep/a.bin and z, then replaces its
// entry swap with a symlink to target (with a file when target is ""), then packs what was
// listed into a dataset in out. It returns the folder and the pack's error.
func packSwapped(t *testing.T, out, swap, target string) (string, error) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub", "deep"), 0o755))
	for _, name := range []string{"a", "sub/a.bin", "sub/deep/a.bin", "z"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte("record "+name), 0o644))
	}
	sel, err := newSelection(Options{})
	require.NoError(t, err)
	in, el, err := openFiles(root, sel)
	require.NoError(t, err)
	defer in.close()
	p := filepath.Join(root, filepath.FromSlash(swap))
	require.NoError(t, os.RemoveAll(p))
	if target == "" {
		require.NoError(t, os.WriteFile(p, []byte("a file now"), 0o644))
	} else {
		require.NoError(t, os.Symlink(target, p))
	}
	_, err = packInput(context.Background(), in, el, filepath.Join(out, "ds"), "root", Options{}, &Result{Format: Files})
	return root, err
}

// recordBytes is r's bytes, read from its section when it has one.
func recordBytes(t *testing.T, r record) []byte {
	if r.sec == nil {
		return r.b
	}
	b, err := io.ReadAll(r.sec)
	require.NoError(t, err)
	return b
}
