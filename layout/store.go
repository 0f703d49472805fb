package layout

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
)

// Store is where a packed dataset's files are, for opening it: a local directory (Open) or an
// object store (package source/s3, through OpenStore). It answers the questions opening asks:
// the manifest's bytes, and for each file the manifest names, where it is and what it is now.
// Every later read goes through the source.Blocks that Blocks returns.
type Store interface {
	// Location names the dataset in messages and is Dataset.Dir: a directory's absolute path,
	// or an s3:// URL.
	Location() string
	// Path returns how messages name the manifest path rel (a path a user can open, a URL).
	Path(rel string) string
	// ReadManifest returns the manifest's bytes; an error wrapping fs.ErrNotExist when there
	// is none. It may return more than MaxManifestBytes (the caller refuses those).
	ReadManifest() ([]byte, error)
	// Stat returns the backend's name for the manifest path rel (a resolved path, an object
	// key) and its identity now, which every later read checks. A missing file is an error
	// wrapping fs.ErrNotExist; an *Error is passed on with the block filled in.
	Stat(rel string) (string, source.Identity, error)
	// Blocks returns a source that reads the files of t (whose names Stat returned).
	Blocks(t source.Table) source.Blocks
}

// OpenStore reads and validates the dataset in st, as Open does for a directory.
func OpenStore(st Store) (*Dataset, error) {
	m, err := storeManifest(st)
	if err != nil {
		return nil, err
	}
	return newDataset(st, m, nil)
}

// storeManifest reads and parses st's manifest.
func storeManifest(st Store) (*Manifest, error) {
	mpath := st.Path(ManifestName)
	data, err := st.ReadManifest()
	var le *Error
	switch {
	case errors.As(err, &le):
		return nil, err
	case errors.Is(err, fs.ErrNotExist):
		return nil, errorf(ErrFormat, mpath, -1, "no manifest: not a blockfs dataset, or an unfinished pack (pack it with blockfs pack)")
	case err != nil:
		return nil, wrapf(ErrFormat, err, mpath, -1, "%v", unwrapPathError(err))
	case len(data) > MaxManifestBytes:
		return nil, errorf(ErrFormat, mpath, -1, "manifest is larger than %d bytes", MaxManifestBytes)
	}
	return ParseManifest(mpath, data)
}

// dirStore is a dataset in a local directory.
type dirStore struct {
	dir     string // absolute
	realDir string // dir with symlinks resolved: files must resolve inside it
}

// newDirStore checks that dir is a directory.
func newDirStore(dir string) (*dirStore, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrFormat, dir, -1, "no such directory")
		}
		return nil, wrapf(ErrFormat, err, dir, -1, "%v", unwrapPathError(err))
	}
	if !st.IsDir() {
		return nil, errorf(ErrFormat, dir, -1, "not a directory (a dataset is a directory with a %s)", ManifestName)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, wrapf(ErrFormat, err, dir, -1, "%v", unwrapPathError(err))
	}
	return &dirStore{dir: abs, realDir: real}, nil
}

func (s *dirStore) Location() string { return s.dir }

func (s *dirStore) Path(rel string) string { return filepath.Join(s.dir, filepath.FromSlash(rel)) }

func (s *dirStore) ReadManifest() ([]byte, error) { return readManifest(s.Path(ManifestName)) }

func (s *dirStore) Blocks(t source.Table) source.Blocks { return local.New(t, false) }

// Stat resolves rel inside the directory and checks that it is a regular file that does not
// escape the directory through a symlink. It returns the resolved path and the file's device,
// inode, size and modification time.
func (s *dirStore) Stat(rel string) (string, source.Identity, error) {
	var none source.Identity
	p := s.Path(rel)
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", none, err
		}
		return "", none, wrapf(ErrIO, err, p, -1, "%v", unwrapPathError(err))
	}
	if r, err := filepath.Rel(s.realDir, resolved); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", none, errorf(ErrUnsafePath, p, -1, "resolves to %s, outside the dataset directory", resolved)
	}
	st, err := os.Stat(resolved)
	if err != nil {
		return "", none, wrapf(ErrIO, err, p, -1, "%v", unwrapPathError(err))
	}
	if !st.Mode().IsRegular() {
		return "", none, errorf(ErrCorrupt, p, -1, "not a regular file (%s)", st.Mode().Type())
	}
	return resolved, identity(st), nil
}
