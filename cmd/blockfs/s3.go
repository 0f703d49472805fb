package main

import (
	"context"
	"errors"

	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/pack"
)

// s3Flags are the object store options of mount, pack, verify and info (for s3:// DATA).
type s3Flags struct{ vals mount.Values }

func (f *s3Flags) register(fl *pflag.FlagSet) {
	if f.vals == nil {
		f.vals = mount.Values{}
	}
	registerOptions(fl, f.vals, mount.GroupStore)
}

// decode checks the options and returns them as mount's (their S3 is the object store's).
func (f *s3Flags) decode() (mount.Options, error) { return mount.Decode("", "", f.vals) }

// packTo packs src into dst: a directory, or an s3:// URL (pack.ToStore: each block's files
// are uploaded as soon as they are written, and the manifest goes last).
func packTo(ctx context.Context, src, dst string, opt pack.Options, f *s3Flags) (*pack.Result, error) {
	if !mount.IsRemote(dst) {
		return pack.Pack(ctx, src, dst, opt)
	}
	so, err := f.decode()
	if err != nil {
		return nil, err
	}
	var res *pack.Result
	err = pack.ToStore(ctx, dst, so.S3, opt.Force, false, opt, func(local string, o pack.Options) error {
		var err error
		res, err = pack.Pack(ctx, src, local, o)
		return err
	})
	return res, usageIfStore(err)
}

// usageIfStore makes an error in opening the destination store a usage error (exit 2).
func usageIfStore(err error) error {
	if errors.Is(err, pack.ErrOpenStore) {
		return usageError{err}
	}
	return err
}

// decodeOptions is mount.Decode with what the command gives every mount of data: the
// packer's indexer of shards served in place.
func decodeOptions(data, mnt string, vals mount.Values) (mount.Options, error) {
	opt, err := mount.Decode(data, mnt, vals)
	opt.Indexer = pack.IndexInPlace
	return opt, err
}
