package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/pack"
	"github.com/blockfs/blockfs/source/s3"
)

// s3Flags are the object store options of mount, pack, verify and info (for s3:// DATA).
type s3Flags struct{ vals mount.Values }

func (f *s3Flags) register(fl *pflag.FlagSet) {
	if f.vals == nil {
		f.vals = mount.Values{}
	}
	registerOptions(fl, f.vals, mount.GroupStore)
}

// options checks the options and returns them as the object store's.
func (f *s3Flags) options() (s3.Options, error) {
	o, err := mount.Decode("", "", f.vals)
	return o.S3, err
}

// openStore returns the object store of an s3:// URL.
func (f *s3Flags) openStore(url string) (*s3.Store, error) {
	opt, err := f.options()
	if err != nil {
		return nil, err
	}
	st, err := s3.Open(url, opt)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return st, nil
}

// packTo packs src into dst: a directory, or an s3:// URL. To an object store, each block's
// files are uploaded as soon as they are written (in a temporary directory in $TMPDIR, beside
// the pre-shuffle's spill) and deleted locally, and the manifest goes last; a failed pack
// removes what it uploaded, best effort.
func packTo(ctx context.Context, src, dst string, opt pack.Options, f *s3Flags) (*pack.Result, error) {
	if !mount.IsRemote(dst) {
		return pack.Pack(ctx, src, dst, opt)
	}
	var res *pack.Result
	err := streamTo(ctx, dst, f, opt.Force, false, func(local string, up *s3.Stream) error {
		opt.Force, opt.BlockDone = false, up.Add
		var err error
		res, err = pack.Pack(ctx, src, local, opt)
		return err
	})
	return res, err
}

// streamTo runs write, which makes a dataset in the local directory it is given while up
// uploads its files to dst (an s3:// URL) as they are done, and then finishes the upload
// (the manifest last: a dataset with fields' when fields is set). A failed write or upload
// removes what was uploaded, best effort. The local directory is in $TMPDIR, with the
// upload's spool beside it.
func streamTo(ctx context.Context, dst string, f *s3Flags, force, fields bool, write func(local string, up *s3.Stream) error) error {
	st, err := f.openStore(dst)
	if err != nil {
		return err
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
	if err := write(local, up); err != nil {
		up.Abort()
		return err
	}
	return up.Finish(local)
}
