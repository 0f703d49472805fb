package pack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/source/objstore"
	"github.com/blockfs/blockfs/source/stores"

	"github.com/blockfs/blockfs/layout"
)

// ErrOpenStore marks an error in opening the destination store (its URL, options or
// credentials): the caller's to fix, before anything was packed.
var ErrOpenStore = errors.New("cannot open the object store")

type openStoreError struct{ error }

func (e openStoreError) Unwrap() []error { return []error{e.error, ErrOpenStore} }

// ToStore makes a dataset in an object store: write makes it in the local directory it is
// given, with opt's BlockDone (and FieldBlockDone) set to upload each block's files as soon
// as they are written, and ToStore then finishes the upload (the manifest last: a dataset
// with fields' when fields is set). A failed write or upload removes what was uploaded, best
// effort. The local directory is a scratch one in $TMPDIR, with the upload's spool beside
// it (and the pre-shuffle's spill); force replaces a dataset already at dst.
func ToStore(ctx context.Context, dst string, store objstore.Options, force, fields bool, opt Options, write func(local string, opt Options) error) error {
	st, err := stores.Open(dst, store)
	if err != nil {
		return openStoreError{err}
	}
	tmp, err := os.MkdirTemp("", "blockfs-pack-")
	if err != nil {
		return fmt.Errorf("cannot make a scratch directory for the pack: %w", err)
	}
	defer os.RemoveAll(tmp)
	spool := filepath.Join(tmp, "upload")
	if err := os.Mkdir(spool, 0o700); err != nil {
		return err
	}
	begin := st.Begin
	if fields {
		begin = st.BeginFields
	}
	up, err := begin(ctx, force, spool)
	if err != nil {
		return err
	}
	local := filepath.Join(tmp, "data")
	opt.Force = false
	opt.BlockDone = up.Add
	opt.FieldBlockDone = func(field, dir string, files []string) error {
		return up.AddUnder(dir, files, layout.FieldDir(field)+"/")
	}
	if err := write(local, opt); err != nil {
		up.Abort()
		return err
	}
	return up.Finish(local)
}
