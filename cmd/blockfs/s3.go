package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/pack"
	"github.com/blockfs/blockfs/source/s3"
)

// s3Flags are the object store flags of mount, pack, verify and info (for s3:// DATA).
type s3Flags struct {
	endpoint    string
	concurrency int
	partSize    string
	timeout     time.Duration
	stall       time.Duration
	retries     int
}

func (f *s3Flags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.endpoint, "endpoint", "", "s3:// object store endpoint URL, e.g. http://127.0.0.1:9000 (default: $AWS_ENDPOINT_URL, else AWS S3)")
	fl.IntVar(&f.concurrency, "s3-concurrency", s3.DefaultConcurrency, "s3://: requests in flight at once (ranged GETs, part uploads)")
	fl.StringVar(&f.partSize, "s3-part-size", ibytes(s3.DefaultPartSize), "s3://: the largest ranged GET, and pack's multipart part size (at least 5MiB)")
	fl.DurationVar(&f.timeout, "s3-timeout", s3.DefaultTimeout, "s3://: time limit of one request, body included (a slow transfer)")
	fl.DurationVar(&f.stall, "s3-stall-timeout", s3.DefaultStallTimeout, "s3://: a request that makes no progress (no answer, no byte) for this long fails and is retried; a store silent for (retries+1) times this gives EIO at once")
	fl.IntVar(&f.retries, "s3-retries", s3.DefaultRetries, "s3://: retries of a failed request (5xx, throttling, reset, timeout, stall), with backoff; then EIO")
}

// options checks the flags and returns them as the package's options.
func (f *s3Flags) options() (s3.Options, error) {
	ps, err := parseSize("s3-part-size", f.partSize)
	if err != nil {
		return s3.Options{}, err
	}
	if f.concurrency < 1 || f.concurrency > 256 {
		return s3.Options{}, usagef("--s3-concurrency %d is out of range (1 to 256)", f.concurrency)
	}
	if ps < s3.MinPartSize || ps > 5<<30 {
		return s3.Options{}, usagef("--s3-part-size %s is out of range (5 MiB, the S3 minimum part, to 5 GiB)", f.partSize)
	}
	if f.timeout <= 0 {
		return s3.Options{}, usagef("--s3-timeout %v must be positive", f.timeout)
	}
	if f.stall <= 0 {
		return s3.Options{}, usagef("--s3-stall-timeout %v must be positive", f.stall)
	}
	if f.retries < 0 || f.retries > 100 {
		return s3.Options{}, usagef("--s3-retries %d is out of range (0 to 100)", f.retries)
	}
	opt := s3.Options{Endpoint: f.endpoint, Concurrency: f.concurrency, PartSize: ps, Timeout: f.timeout, StallTimeout: f.stall, Retries: f.retries}
	if f.retries == 0 {
		opt.Retries = -1 // Validate's default is for the zero value; -1 asks for none
	}
	return opt, nil
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

// diskCacheFlags are mount's --disk-cache and --disk-cache-size (s3:// only).
type diskCacheFlags struct {
	dir  string
	size string
}

func (f *diskCacheFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.dir, "disk-cache", "", "s3://: keep fetched block files in this local directory, reused across epochs and remounts (checked by CRC32C on every reuse)")
	fl.StringVar(&f.size, "disk-cache-size", "auto", "s3://: bound on the --disk-cache directory (least recently used files go); auto: the dataset's size, or what the filesystem has free")
}
