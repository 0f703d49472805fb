package mount

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blockfs/blockfs/internal/infiles"
	"github.com/blockfs/blockfs/source/objstore"
	"github.com/blockfs/blockfs/source/stores"

	"github.com/blockfs/blockfs/internal/odirect"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/privdir"
	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
	"golang.org/x/sys/unix"
)

// Shards served in place (layout/shards.go): WebDataset tar shards or TFRecord files in a
// folder, a glob or an object store prefix, read through an index (blockfs index, or made by
// the mount into a directory of the user's) and mounted as a dataset with fields, as pack
// would have made of them.

// shardFormat returns the one format of names, by their extensions, or an error naming a
// name of another.
func shardFormat(src string, names []string) (string, error) {
	var format string
	for _, n := range names {
		f, _ := infiles.ShardFormat(n)
		if format != "" && f != format {
			return "", Usagef("%s holds both %s and %s shards (%s): index each kind apart", src, format, f, n)
		}
		format = f
	}
	if format == "" {
		return "", Usagef("%s holds no shards (.tar, .tfrecord)", src)
	}
	return format, nil
}

// ListShards returns the shards at src (a folder, a quoted glob or a store's prefix), sorted by
// name, their format (infiles.WebDataset or infiles.TFRecord) and the location their names
// are relative to: what an Indexer indexes.
func ListShards(ctx context.Context, src string, s3opt objstore.Options) (string, string, []infiles.Shard, error) {
	if IsRemote(src) {
		return listRemoteShards(ctx, src, s3opt)
	}
	var paths []string
	format, _, ok := infiles.DetectShards(src)
	if !ok {
		var names []string
		if m, err := filepath.Glob(src); err == nil {
			names = m
		}
		var err error
		if format, err = shardFormat(src, names); err != nil {
			return "", "", nil, err
		}
	}
	paths, err := infiles.List(src, format, infiles.ShardExts[format])
	if err != nil {
		return "", "", nil, Usagef("%v", err)
	}
	// The files themselves, not links to them (a glob of a cache's snapshot of links): the
	// mount reads a shard by its path and never through a link.
	var real []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return "", "", nil, fmt.Errorf("cannot read the shard %s: %w", p, err)
		}
		if st, err := os.Stat(abs); err == nil && st.Size() > 0 { // an empty file holds no sample
			real = append(real, abs)
		}
	}
	if len(real) == 0 {
		return "", "", nil, Usagef("%s holds no shards with data", src)
	}
	at := commonDir(real)
	shards := make([]infiles.Shard, len(real))
	for i, p := range real {
		st, err := os.Stat(p)
		if err != nil {
			return "", "", nil, err
		}
		rel, _ := filepath.Rel(at, p)
		shards[i] = infiles.Shard{Name: filepath.ToSlash(rel), Size: st.Size(), MtimeNs: st.ModTime().UnixNano(),
			Open: func(context.Context) (io.ReadCloser, error) { return openShard(p) }}
	}
	return format, at, shards, nil
}

// openShard opens a local shard to be read once, whole, with O_DIRECT where the filesystem
// has it (index reads it in aligned chunks of whole pages: no copy through the kernel's page
// cache, and none of the shard left in it).
func openShard(path string) (*os.File, error) {
	f, _, _, err := odirect.Open(true, func(flags int) (*os.File, error) {
		return os.OpenFile(path, os.O_RDONLY|flags, 0)
	})
	return f, err
}

// commonDir returns the deepest directory holding every path, absolute.
func commonDir(paths []string) string {
	dir, _ := filepath.Abs(filepath.Dir(paths[0]))
	for _, p := range paths[1:] {
		abs, _ := filepath.Abs(p)
		for dir != "/" && !strings.HasPrefix(abs, dir+string(filepath.Separator)) {
			dir = filepath.Dir(dir)
		}
	}
	return dir
}

// listRemoteShards lists the shards under a store's prefix (s3://, gs://, az://: one that lists).
func listRemoteShards(ctx context.Context, src string, s3opt objstore.Options) (string, string, []infiles.Shard, error) {
	st, err := stores.Open(src, s3opt)
	if err != nil {
		return "", "", nil, Usagef("%v", err)
	}
	objs, err := st.Objects(ctx)
	if err != nil {
		return "", "", nil, err
	}
	var names []string
	for rel := range objs {
		if _, ok := infiles.ShardFormat(rel); ok && !strings.HasPrefix(filepath.Base(rel), ".") && objs[rel] > 0 {
			names = append(names, rel)
		}
	}
	sort.Strings(names)
	format, err := shardFormat(src, names)
	if err != nil {
		return "", "", nil, err
	}
	shards := make([]infiles.Shard, len(names))
	for i, rel := range names {
		_, id, err := st.Stat(rel)
		if err != nil {
			return "", "", nil, err
		}
		shards[i] = infiles.Shard{Name: rel, Size: id.Size, ETag: id.Tag,
			Open: func(ctx context.Context) (io.ReadCloser, error) { return st.OpenObject(ctx, rel, id.Tag) }}
	}
	return format, strings.TrimSuffix(src, "/"), shards, nil
}

// shardsBackend returns where a dataset of the shards the index ix names reads them: the
// index's files read buffered, the shards read buffered too (a value's neighbours, another
// field's, are read soon after) or from the object store.
func shardsBackend(ix *layout.ShardsIndex, s3opt objstore.Options) (layout.ShardsBackend, error) {
	be := layout.ShardsBackend{Index: func(t source.Table) source.Blocks { return local.New(t, false) }}
	if !IsRemote(ix.Source) {
		be.Shards = func(t source.Table) source.Blocks { return local.New(t, true) }
		be.Aligned = true
		be.Locate = func(rel string) (string, source.Identity, error) {
			p := filepath.Join(ix.Source, filepath.FromSlash(rel))
			st, err := os.Lstat(p)
			if err != nil {
				return "", source.Identity{}, err
			}
			if !st.Mode().IsRegular() {
				return "", source.Identity{}, fmt.Errorf("not a regular file")
			}
			return p, layout.FileIdentity(st), nil
		}
		return be, nil
	}
	if err := s3opt.Validate(); err != nil {
		return be, Usagef("%v", err)
	}
	st, err := stores.Open(ix.Source, s3opt)
	if err != nil {
		return be, Usagef("%v", err)
	}
	be.Shards = func(t source.Table) source.Blocks {
		// A store of its own for each field, as each field of a packed dataset has: its
		// requests, and its counters in stats.json, are the field's.
		own, err := stores.Open(ix.Source, s3opt)
		if err != nil {
			own = st // the options were checked by the first Open: not reached
		}
		return objstore.NewBlocks(own, t)
	}
	be.Locate = st.Stat
	return be, nil
}

// IsShards reports whether data names shards to serve in place: a folder of nothing but
// .tar or .tfrecord files, or a glob of them. (A store's prefix is asked by RemoteShards.)
func IsShards(data string) bool {
	if _, _, ok := infiles.DetectShards(data); ok {
		return true
	}
	if !strings.ContainsAny(data, "*?[") {
		return false
	}
	m, err := filepath.Glob(data)
	if err != nil || len(m) == 0 {
		return false
	}
	_, err = shardFormat(data, m)
	return err == nil
}

// RemoteShards reports whether the store prefix url holds shards and no dataset.
func RemoteShards(url string, s3opt objstore.Options) bool {
	st, err := stores.Open(url, s3opt)
	if err != nil {
		return false
	}
	if plain, err := st.Exists(objstore.ManifestName); plain || err != nil {
		return false
	}
	objs, err := st.Objects(context.Background())
	if err != nil {
		return false
	}
	for rel := range objs {
		if _, ok := infiles.ShardFormat(rel); ok {
			return true
		}
	}
	return false
}

// DefaultIndexDir returns where a mount of the shards at data keeps their index when not told
// (--index), making the directories above it: <cache>/blockfs/index/<the first 8 bytes of the
// sha256 of data's absolute path or URL, in hex>. <cache> is the user's cache directory
// ($XDG_CACHE_HOME, else ~/.cache) where it is private (internal/privdir: the user's own,
// writable by no one else, no symlink), else blockfs-UID in the temporary directory, private
// too. An index is used again only from there: a path anyone can compute (a shared /tmp,
// another user's $HOME under sudo -E) could hold an index another user planted, whose values
// and checksums agree with each other and not with the shards.
func DefaultIndexDir(data string) (string, error) {
	at := data
	if !IsRemote(data) {
		at, _ = filepath.Abs(data)
	}
	sum := sha256.Sum256([]byte(at))
	name := hex.EncodeToString(sum[:8])
	if cache, err := os.UserCacheDir(); err == nil {
		dir, err := privdir.Make(cache, "blockfs", "index")
		if err == nil {
			return filepath.Join(dir, name), nil
		}
		log.Printf("blockfs: not keeping the shards' index in the cache directory: %v", err)
	}
	tmp := filepath.Join(os.TempDir(), fmt.Sprintf("blockfs-%d", os.Geteuid()))
	// In a shared temporary directory the name itself is not trusted: no symlink there.
	err := privdir.Check(tmp)
	dir := ""
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		dir, err = privdir.Make(tmp, "index")
	}
	if err != nil {
		return "", Usagef("no private directory for the shards' index (%v): pass %s DIR, a directory of your own", err, optname.Flag("index"))
	}
	return filepath.Join(dir, name), nil
}

// indexFor returns the index directory of a mount of the shards at opt.Data: opt.Index or the
// default, made (or made again, when the shards changed) before the mount.
func indexFor(opt Options) (*shardsData, error) {
	dir := opt.Index
	if dir == "" {
		var err error
		if dir, err = DefaultIndexDir(opt.Data); err != nil {
			return nil, err
		}
		// Made by this user (or root) if there: its parent is private. Checked all the same.
		if err := privdir.Check(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, Usagef("the shards' index directory %v: pass %s DIR, a directory of your own", err, optname.Flag("index"))
		}
	}
	ctx := context.Background()
	format, at, shards, err := ListShards(ctx, opt.Data, opt.S3)
	if err != nil {
		return nil, err
	}
	if layout.IsShardsIndex(dir) {
		ix, err := layout.ReadShardsIndex(dir)
		if err == nil && !sameShards(ix, at, shards) {
			err = fmt.Errorf("it indexes %d shards at %s, not the %d shards at %s", len(ix.Shards), ix.Source, len(shards), at)
		}
		if err == nil {
			err = staleErr(dir)
		}
		var sd *shardsData
		if err == nil {
			if sd, err = openShards(dir, ix, opt.S3); err == nil {
				sd.auto = opt.Index == ""
				return sd, nil
			}
		}
		log.Printf("blockfs: the index in %s is not of these shards as they are now (%v): indexing them again", dir, err)
	}
	if opt.Indexer == nil {
		return nil, Usagef("the shards at %s have no index here: make one (blockfs index %s DIR) and mount DIR, or pass %s DIR", opt.Data, opt.Data, optname.Flag("index"))
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, Usagef("%s %s: %v", optname.Flag("index"), dir, err)
	}
	log.Printf("blockfs: indexing the shards at %s into %s (once; the shards are not copied)", opt.Data, dir)
	ix, err := opt.Indexer(ctx, format, at, shards, dir)
	if err != nil {
		return nil, err
	}
	log.Printf("blockfs: indexed %d samples of %d shards in %d blocks", ix.Records, len(ix.Shards), len(ix.Blocks))
	sd, err := openShards(dir, ix, opt.S3)
	if sd != nil {
		sd.auto = opt.Index == ""
	}
	return sd, err
}

// A shard edited in place with its size and modification time kept looks unchanged to a
// mount, which would reuse its index and serve EIO (the values do not match the index's
// CRC32C) on every mount after. So a read that finds a value that does not match, under a
// mount of the automatic index, and blockfs verify that finds one, mark the index stale: a
// file staleName in its directory, saying why. The next mount of the shards indexes them
// again (which replaces the directory, the mark with it).
const staleName = "stale"

// markStale marks the index in the directory dir (open) stale, saying why: once; a mark
// there already stays.
func markStale(dir *os.File, why string) error {
	fd, err := unix.Openat(int(dir.Fd()), staleName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), staleName)
	_, err = f.WriteString(why + "\n")
	return errors.Join(err, f.Close())
}

// staleErr says why the index in dir is stale, or nil when it is not marked.
func staleErr(dir string) error {
	b, err := userfile.ReadFile(filepath.Join(dir, staleName), 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("it is marked stale (%v)", err)
	}
	return fmt.Errorf("a read found it out of step with the shards: %s", strings.TrimSpace(string(b)))
}

// MarkIndexStale marks the automatic index of the shards at data (DefaultIndexDir), if there
// is one, stale, so that their next mount indexes them again; it returns its directory ("":
// none).
func MarkIndexStale(data, why string) (string, error) {
	dir, err := DefaultIndexDir(data)
	if err != nil || !layout.IsShardsIndex(dir) {
		return "", err
	}
	f, err := os.Open(dir)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return dir, markStale(f, why)
}

// openShards opens the index ix read from dir: a dataset per field, reading the shards where
// ix says they are.
func openShards(dir string, ix *layout.ShardsIndex, s3opt objstore.Options) (*shardsData, error) {
	be, err := shardsBackend(ix, s3opt)
	if err != nil {
		return nil, err
	}
	sd := &shardsData{index: dir, kind: Dir}
	if sd.man, sd.dss, err = layout.OpenShards(dir, ix, be); err != nil {
		return nil, err
	}
	if IsRemote(ix.Source) {
		sd.kind = Remote
	}
	return sd, nil
}

// sameShards reports whether ix indexes the shards listed (at, shards): the same location and
// names, in order (what each shard is now, OpenShards checks).
func sameShards(ix *layout.ShardsIndex, at string, shards []infiles.Shard) bool {
	if ix.Source != at || len(ix.Shards) != len(shards) {
		return false
	}
	for i, sh := range shards {
		if ix.Shards[i].Name != sh.Name {
			return false
		}
	}
	return true
}

// shardsData is shards in place, opened: their index directory, its fields manifest, a
// dataset per field, and where the shards are (Dir or Remote).
type shardsData struct {
	index string
	auto  bool // index is the automatic one (DefaultIndexDir), which a mount may make again
	man   *layout.FieldsManifest
	dss   []*layout.Dataset
	kind  Kind
}

// withFields opens what opt.Data holds when it is more than one plain dataset: a dataset with
// fields (its manifest), or shards in place (sd; and their manifest when they have more than
// one field, else they are served as one plain dataset, as pack makes of one field). Both nil:
// a plain dataset, a file in place or a directory that holds none of these.
func withFields(opt Options) (*layout.FieldsManifest, *shardsData, error) {
	loc := Locate(opt.Data)
	switch loc.Kind {
	case FieldsDir:
		man, err := layout.ReadFieldsManifest(loc.Abs)
		return man, nil, err
	case Remote:
		man, err := RemoteFields(opt.Data, opt.S3)
		if err != nil || man != nil || !RemoteShards(opt.Data, opt.S3) {
			return man, nil, err
		}
	case ShardsIndex, Shards:
	default:
		if opt.Index != "" {
			return nil, nil, Usagef("%s is for shards served in place (.tar, .tfrecord); %s is not a folder, glob or store prefix (s3://, gs://, az://) of them", optname.Flag("index"), opt.Data)
		}
		return nil, nil, nil
	}
	if opt.InPlace.given() {
		return nil, nil, Usagef("%s are shards served in place: %s do not apply to them", opt.Data, inPlaceFlagList)
	}
	var sd *shardsData
	switch {
	case loc.Kind != ShardsIndex:
		var err error
		if sd, err = indexFor(opt); err != nil {
			return nil, nil, err
		}
	case opt.Index != "":
		return nil, nil, Usagef("%s %s is an index already: %s is for the shards", opt.Data, opt.Data, optname.Flag("index"))
	default:
		ix, err := layout.ReadShardsIndex(opt.Data)
		if err != nil {
			return nil, nil, err
		}
		if sd, err = openShards(opt.Data, ix, opt.S3); err != nil {
			return nil, nil, err
		}
	}
	if len(sd.dss) == 1 {
		return nil, sd, nil
	}
	return sd.man, sd, nil
}

// autoIndex is the index directory a read that finds a shard edited in place marks stale:
// the automatic one, of local shards (an object's change shows in its ETag; a CRC32C that
// does not match there is damage, which indexing again would take for the truth); "" else.
func (sd *shardsData) autoIndex() string {
	if !sd.auto || sd.kind == Remote {
		return ""
	}
	return sd.index
}

// plain returns the plan of shards in place of one field: one plain dataset.
func (sd *shardsData) plain(opt Options) (*Plan, error) {
	p := &Plan{opt: opt, loc: Location{Kind: sd.kind, Name: opt.Data, Abs: sd.index}, ds: sd.dss[0], autoIndex: sd.autoIndex()}
	p.opt.Order, p.order = ChooseOrder(p.ds, p.opt.Order)
	if err := p.opt.Order.Validate(); err != nil {
		return nil, Usagef("%s %d: %v", optname.Flag("mix"), p.opt.Order.Mix, err)
	}
	return p, nil
}

// shardsField is the plan of field fl of shards in place, whose dataset is ds.
func shardsField(so Options, fl layout.Field, ds *layout.Dataset, kind Kind) (*Plan, error) {
	so.Data = filepath.Join(so.Data, filepath.FromSlash(fl.Dir))
	sub := &Plan{opt: so, loc: Location{Kind: kind, Name: so.Data, Abs: so.Data}, ds: ds}
	sub.opt.Order, sub.order = ChooseOrder(ds, so.Order)
	if err := sub.opt.Order.Validate(); err != nil {
		return nil, Usagef("%s %d: %v", optname.Flag("mix"), sub.opt.Order.Mix, err)
	}
	return sub, nil
}
