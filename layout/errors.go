package layout

import (
	"fmt"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/source"
)

// Sentinel errors. Every error returned by this package wraps exactly one of them, so callers
// can classify with errors.Is and still print the full message (which names the file). Where a
// backend has the same kind of error, the sentinel here is built on source's (see sentinel):
// errors.Is(err, source.ErrCorrupt) holds for an ErrCorrupt too.
var (
	// ErrFormat: the manifest is missing, unparsable, of an unknown version, or inconsistent.
	ErrFormat error = &sentinel{"bad dataset format", nil}
	// ErrCorrupt: a file's size or contents disagree with the manifest (source.ErrCorrupt
	// about a dataset's file).
	ErrCorrupt error = &sentinel{"corrupt dataset", source.ErrCorrupt}
	// ErrUnsafePath: a manifest path is absolute, leaves the dataset directory, or is a symlink
	// that points outside it.
	ErrUnsafePath error = &sentinel{"unsafe path in manifest", nil}
	// ErrExists: the destination of a writer already exists and overwriting was not asked for.
	ErrExists error = &sentinel{"destination exists", nil}
	// ErrIO: a file could not be opened or read for a reason that says nothing about the data
	// (EMFILE, EIO, EACCES): the cause says which.
	ErrIO error = &sentinel{"cannot read dataset", nil}
)

// sentinel is a sentinel of this package; where it refines one of package source's (base),
// errors.Is sees that one through it.
type sentinel struct {
	msg  string
	base error
}

func (s *sentinel) Error() string { return s.msg }

// Unwrap returns the base sentinel, or nil.
func (s *sentinel) Unwrap() error { return s.base }

// Error describes what is wrong with one file of a dataset.
type Error struct {
	Path  string // the file concerned, as a path the user can open
	Block int    // the block index, or -1 when the problem is not about a block
	Kind  error  // one of the sentinels above
	Msg   string // what is wrong, in words
	Err   error  // the cause (an errno, a source error), or nil
}

func (e *Error) Error() string {
	if e.Block >= 0 {
		return fmt.Sprintf("%s: block %d: %s", e.Path, e.Block, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// Unwrap returns the sentinel and the cause, so errors.Is(err, ErrCorrupt) and
// errors.Is(err, syscall.EMFILE) both work.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

func errorf(kind error, path string, block int, format string, args ...any) *Error {
	return &Error{Path: path, Block: block, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// existsError refuses to write a dataset at dst, which exists, without force (a Writer's and
// a FieldWriter's).
func existsError(dst string) error {
	return errorf(ErrExists, dst, -1, "already exists (use %s to replace it)", optname.Flag("force"))
}

// wrapf is errorf keeping cause as the error's cause.
func wrapf(kind, cause error, path string, block int, format string, args ...any) *Error {
	e := errorf(kind, path, block, format, args...)
	e.Err = cause
	return e
}
