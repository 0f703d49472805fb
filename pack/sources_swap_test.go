package pack

import (
	"io"
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

// recordBytes is r's bytes, read from its section when it has one.
func recordBytes(t *testing.T, r record) []byte {
	if r.sec == nil {
		return r.b
	}
	b, err := io.ReadAll(r.sec)
	require.NoError(t, err)
	return b
}
