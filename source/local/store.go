package local

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
)

// Store is a packed dataset in a local directory: a layout.Store whose files are paths inside
// it, read with Files. Immutable after NewStore.
type Store struct {
	dir     string // absolute
	realDir string // dir with symlinks resolved: files must resolve inside it
}

var _ layout.Store = (*Store)(nil)

// NewStore checks that dir is a directory. Errors wrap layout.ErrFormat and name dir.
func NewStore(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, layout.StoreError(layout.ErrFormat, dir, "no such directory")
		}
		return nil, layout.PathError(layout.ErrFormat, dir, err)
	}
	if !st.IsDir() {
		return nil, layout.StoreError(layout.ErrFormat, dir, "not a directory (a dataset is a directory with a %s)", layout.ManifestName)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, layout.PathError(layout.ErrFormat, dir, err)
	}
	return &Store{dir: abs, realDir: real}, nil
}

// Open reads and validates the dataset in directory dir (layout.OpenStore). Its Source reads
// the files buffered. Errors wrap layout.ErrFormat, ErrCorrupt or ErrUnsafePath and name the
// file.
func Open(dir string) (*layout.Dataset, error) {
	st, err := NewStore(dir)
	if err != nil {
		return nil, err
	}
	return layout.OpenStore(st)
}

// Verify checks the dataset in directory dir, every file's CRC32C included, and calls report
// for each problem (layout.VerifyStore).
func Verify(dir string, report func(error)) (layout.VerifyResult, error) {
	st, err := NewStore(dir)
	if err != nil {
		return layout.VerifyResult{}, err
	}
	return layout.VerifyStore(st, report)
}

// Location implements layout.Store: the directory's absolute path.
func (s *Store) Location() string { return s.dir }

// Path implements layout.Store.
func (s *Store) Path(rel string) string { return filepath.Join(s.dir, filepath.FromSlash(rel)) }

// ReadManifest implements layout.Store. A manifest that is not a regular file (a FIFO would
// wait for a writer, /dev/zero would never end) is refused without waiting (userfile).
func (s *Store) ReadManifest() ([]byte, error) {
	f, _, err := userfile.Open(s.Path(layout.ManifestName), -1)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, layout.MaxManifestBytes+1))
}

// Blocks implements layout.Store: the files read buffered.
func (s *Store) Blocks(t source.Table) source.Blocks { return New(t, false) }

// Stat implements layout.Store. It resolves rel inside the directory and checks that it is a
// regular file that does not escape the directory through a symlink. It returns the resolved
// path and the file's device, inode, size and modification time.
func (s *Store) Stat(rel string) (string, source.Identity, error) {
	var none source.Identity
	p := s.Path(rel)
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", none, err
		}
		return "", none, layout.PathError(layout.ErrIO, p, err)
	}
	if !userfile.Within(s.realDir, resolved) {
		return "", none, layout.StoreError(layout.ErrUnsafePath, p, "resolves to %s, outside the dataset directory", resolved)
	}
	st, err := os.Stat(resolved)
	if err != nil {
		return "", none, layout.PathError(layout.ErrIO, p, err)
	}
	if !st.Mode().IsRegular() {
		return "", none, layout.StoreError(layout.ErrCorrupt, p, "not a regular file (%s)", st.Mode().Type())
	}
	return resolved, layout.FileIdentity(st), nil
}
