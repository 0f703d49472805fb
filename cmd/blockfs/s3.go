package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/pack"
	"github.com/blockfs/blockfs/source/diskcache"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/source/s3"
)

// s3Flags are the object store flags of mount, pack, verify and info (for s3:// DATA).
type s3Flags struct {
	endpoint    string
	concurrency int
	partSize    string
	timeout     time.Duration
	retries     int
}

func (f *s3Flags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.endpoint, "endpoint", "", "s3:// object store endpoint URL, e.g. http://127.0.0.1:9000 (default: $AWS_ENDPOINT_URL, else AWS S3)")
	fl.IntVar(&f.concurrency, "s3-concurrency", s3.DefaultConcurrency, "s3://: requests in flight at once (ranged GETs, part uploads)")
	fl.StringVar(&f.partSize, "s3-part-size", ibytes(s3.DefaultPartSize), "s3://: the largest ranged GET, and pack's multipart part size (at least 5MiB)")
	fl.DurationVar(&f.timeout, "s3-timeout", s3.DefaultTimeout, "s3://: time limit of one request, body included")
	fl.IntVar(&f.retries, "s3-retries", s3.DefaultRetries, "s3://: retries of a failed request (5xx, throttling, reset, timeout), with backoff; then EIO")
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
	if f.retries < 0 || f.retries > 100 {
		return s3.Options{}, usagef("--s3-retries %d is out of range (0 to 100)", f.retries)
	}
	opt := s3.Options{Endpoint: f.endpoint, Concurrency: f.concurrency, PartSize: ps, Timeout: f.timeout, Retries: f.retries}
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

// openPacked opens a packed dataset: a directory, or an s3:// URL.
func openPacked(data string, f *s3Flags) (*layout.Dataset, error) {
	if !s3.IsURL(data) {
		return local.Open(data)
	}
	st, err := f.openStore(data)
	if err != nil {
		return nil, err
	}
	return layout.OpenStore(st)
}

// maxRemoteRead is the largest cache load from an object store: a block file up to this size
// is fetched and checked whole in one load.
const maxRemoteRead = 64 << 20

// openRemote opens a packed dataset in an object store for mount; the flags of a file served
// in place do not apply to it.
func openRemote(in inPlaceFlags, f *s3Flags, data string) (*layout.Dataset, error) {
	for _, fl := range []struct {
		name string
		set  bool
	}{{"--record-size", in.recordSize != ""}, {"--offset", in.offset != "0"}, {"--records", in.records != 0},
		{"--window", in.window != ""}, {"--segments", in.segments != ""}} {
		if fl.set {
			return nil, usagef("%s is for a local file served in place; %s is a packed dataset in an object store", fl.name, data)
		}
	}
	return openPacked(data, f)
}

// packTo packs src into dst: a directory, or an s3:// URL. To an object store, each block's
// files are uploaded as soon as they are written (in a temporary directory in $TMPDIR, beside
// the pre-shuffle's spill) and deleted locally, and the manifest goes last; a failed pack
// removes what it uploaded, best effort.
func packTo(ctx context.Context, src, dst string, opt pack.Options, f *s3Flags) (*pack.Result, error) {
	if !s3.IsURL(dst) {
		return pack.Pack(ctx, src, dst, opt)
	}
	st, err := f.openStore(dst)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "blockfs-pack-")
	if err != nil {
		return nil, fmt.Errorf("cannot make a scratch directory for the pack: %w", err)
	}
	defer os.RemoveAll(tmp)
	spool := filepath.Join(tmp, "upload")
	if err := os.Mkdir(spool, 0o700); err != nil {
		return nil, err
	}
	up, err := st.Begin(ctx, opt.Force, spool)
	if err != nil {
		return nil, err
	}
	opt.Force, opt.BlockDone = false, up.Add
	res, err := pack.Pack(ctx, src, filepath.Join(tmp, "data"), opt)
	if err != nil {
		up.Abort()
		return nil, err
	}
	if err := up.Finish(filepath.Join(tmp, "data")); err != nil {
		return nil, err
	}
	return res, nil
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

// options checks the flags for the dataset ds mounted at mnt and returns the disk cache's
// options, or nil without --disk-cache. It creates nothing: the daemon opens the cache.
func (f *diskCacheFlags) options(ds *layout.Dataset, remote bool, mnt string) (*diskcache.Options, error) {
	if f.dir == "" {
		if f.size != "auto" {
			return nil, usagef("--disk-cache-size goes with --disk-cache DIR")
		}
		return nil, nil
	}
	if !remote {
		return nil, usagef("--disk-cache is for a dataset in an object store (s3://); %s is read from local disk already", ds.Dir)
	}
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return nil, usagef("--disk-cache %s: %v", f.dir, err)
	}
	if inside(dir, mnt) || inside(mnt, dir) {
		return nil, usagef("--disk-cache %s and the mount point %s must not be inside one another", f.dir, mnt)
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, usagef("--disk-cache %s is not a directory", f.dir)
	}
	var total, largest int64 // the dataset's files
	for id := layout.FileID(0); id <= layout.NamesFile(ds.Blocks()); id++ {
		n := ds.Size(id)
		total += n
		largest = max(largest, n)
	}
	var size int64
	if f.size == "auto" {
		size = min(total, diskRoom(dir))
	} else if size, err = parseSize("disk-cache-size", f.size); err != nil {
		return nil, err
	}
	if size < largest {
		return nil, usagef("--disk-cache-size %s is smaller than the dataset's largest file (%s)%s; raise it, or free space under %s",
			ibytes(uint64(size)), ibytes(uint64(largest)), map[bool]string{true: " (auto: the filesystem's free space)", false: ""}[f.size == "auto"], f.dir)
	}
	return &diskcache.Options{Dir: dir, Size: size, Namespace: ds.Manifest.Fingerprint(), Files: layout.NamesFile(ds.Blocks()) + 1}, nil
}

// inside reports whether path is dir or below it.
func inside(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// diskRoom is what --disk-cache-size auto may use: 90% of the free space of the filesystem of
// dir (or of its nearest existing parent) plus what dir's cached files hold already.
func diskRoom(dir string) int64 {
	p := dir
	var fs unix.Statfs_t
	for unix.Statfs(p, &fs) != nil && p != filepath.Dir(p) {
		p = filepath.Dir(p)
	}
	room := int64(fs.Bavail) * fs.Bsize / 10 * 9
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.blk"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			room += st.Size()
		}
	}
	return room
}

// openDiskCache puts the disk cache between the object store and the page cache (and below
// --verify's check), and returns what closes it and logs its counters, and what reads the
// counters for stats.json.
func openDiskCache(plan *mountPlan, verify bool) (func(), func() any, error) {
	dc, err := diskcache.Open(plan.src, plan.ds, *plan.disk)
	if err != nil {
		return nil, nil, err
	}
	plan.src = dc
	if verify {
		if plan.src, err = layout.NewVerified(plan.ds, plan.src); err != nil {
			dc.Close()
			return nil, nil, usagef("--verify: %v", err)
		}
	}
	st := dc.Stats()
	log.Printf("blockfs: disk cache %s: %s in %d files, bound %s; keeps the first %d of the dataset's files", plan.disk.Dir, ibytes(uint64(st.Used)), st.Files, ibytes(uint64(dc.Limit())), dc.KeptFiles())
	return func() {
		st := dc.Stats()
		log.Printf("blockfs: disk cache %s: %d reads from disk, %d files fetched, %d evicted, %d bad (fetched again), %d not kept; %s in %d files",
			plan.disk.Dir, st.Hits, st.Fetches, st.Evicted, st.Bad, st.WriteErr, ibytes(uint64(st.Used)), st.Files)
		dc.Close()
	}, func() any { return dc.Stats() }, nil
}

// withInfo returns m with the entries of extra added (info.json's facts).
func withInfo(extra, m map[string]any) map[string]any {
	for k, v := range extra {
		m[k] = v
	}
	return m
}
