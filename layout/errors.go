package layout

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps exactly one of them, so callers
// can classify with errors.Is and still print the full message (which names the file).
var (
	// ErrFormat: the manifest is missing, unparsable, of an unknown version, or inconsistent.
	ErrFormat = errors.New("bad dataset format")
	// ErrCorrupt: a file's size or contents disagree with the manifest.
	ErrCorrupt = errors.New("corrupt dataset")
	// ErrUnsafePath: a manifest path is absolute, leaves the dataset directory, or is a symlink
	// that points outside it.
	ErrUnsafePath = errors.New("unsafe path in manifest")
	// ErrExists: the destination of a writer already exists and overwriting was not asked for.
	ErrExists = errors.New("destination exists")
)

// Error describes what is wrong with one file of a dataset.
type Error struct {
	Path  string // the file concerned, as a path the user can open
	Block int    // the block index, or -1 when the problem is not about a block
	Kind  error  // one of the sentinels above
	Msg   string // what is wrong, in words
}

func (e *Error) Error() string {
	if e.Block >= 0 {
		return fmt.Sprintf("%s: block %d: %s", e.Path, e.Block, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// Unwrap returns the sentinel, so errors.Is(err, ErrCorrupt) works.
func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, path string, block int, format string, args ...any) *Error {
	return &Error{Path: path, Block: block, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}
