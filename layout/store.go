package layout

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/source"
)

// Store is where a packed dataset's files are, for opening it with OpenStore: a local
// directory (package source/local) or a store (package source/objstore: S3, a web server). It
// answers the questions opening asks: the manifest's bytes, and for each file the manifest
// names, where it is and what it is now (asked of many files at once: safe for concurrent
// use). Every later read goes through the source.Blocks that Blocks returns.
type Store interface {
	// Location names the dataset in messages and is Dataset.Dir: a directory's absolute path,
	// or a URL (s3://, gs://, az://, https://).
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

// OpenStore reads and validates the dataset in st: the manifest, and for every block that its
// files exist, are what st says is a regular file of the right size, and (variable-length)
// that the offsets index starts at 0 and ends at the block's size. Nothing is served from a
// dataset that fails here. Errors wrap ErrFormat, ErrCorrupt or ErrUnsafePath and name the
// file.
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
		return nil, PathError(ErrFormat, mpath, err)
	case len(data) > MaxManifestBytes:
		return nil, errorf(ErrFormat, mpath, -1, "manifest is larger than %d bytes", MaxManifestBytes)
	}
	return ParseManifest(mpath, data)
}

// StoreError returns an error of kind (ErrFormat, ErrCorrupt, ErrUnsafePath) about the file
// at path, for a Store to return from Stat (opening fills in the block) or from its own opening.
func StoreError(kind error, path, format string, args ...any) *Error {
	return errorf(kind, path, -1, format, args...)
}

// PathError returns an error of kind about the file at path, caused by err (a failed open,
// stat or read): its message is err's without the path it names again, and err stays its
// cause for errors.Is.
func PathError(kind error, path string, err error) *Error {
	return wrapf(kind, err, path, -1, "%v", userfile.PathCause(err))
}

// FileIdentity returns what a local file is: device, inode, size and modification time (for
// a file served in place, and a Store of local files).
func FileIdentity(st fs.FileInfo) source.Identity {
	id := source.Identity{Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Ino = uint64(sys.Dev), sys.Ino
	}
	return id
}
