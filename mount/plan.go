// Package mount owns a blockfs mount: it opens the dataset a location names (a directory, a
// file served in place, an object store), checks the mount point, plans memory and readahead,
// builds the stack of sources below the page cache in one place, serves the FUSE tree and
// handles signals until the mount goes away. The command line only turns flags into Options
// (as rclone's cmd/mount2 does over mountlib).
package mount

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/blockfs/blockfs/cache"
	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount/daemon"
	"github.com/blockfs/blockfs/mount/memory"
	"github.com/blockfs/blockfs/source/diskcache"
)

// maxRemoteRead is the largest cache load from an object store: a block file up to this size
// is fetched and checked whole in one load.
const maxRemoteRead = 64 << 20

// Plan is a mount checked and planned, before anything is mounted or opened for writing (the
// disk cache takes a lock, so the daemon opens it in Serve). Immutable after New, but for
// what build sets (grows, cut, the cache's Max) and the cut a growing cache lowers.
type Plan struct {
	opt Options
	loc Location
	ds  *layout.Dataset
	mnt string // the mount point, absolute
	// mntDir is the mount point's directory as its check opened it (nil for /dev/fd/N): a mount
	// as root is made through it; serve closes it.
	mntDir *os.File
	need   memory.CacheNeed
	// grows and cut are set by build: whether the cache grows for readers at once, and the
	// block from which blocks stream (grow.go; nil: the plan's resident set, fixed).
	grows     bool
	cut       *atomic.Int64
	mem       memory.Plan
	cacheOpt  cache.Options
	readahead int64
	disk      *diskcache.Options // nil without a disk cache
	order     OrderChoice        // opt.Order.Mix, resolved, and why
	// At most one of mix, fields and nodes is set: the plan's shape (shape.go; none: one
	// dataset, ds, served whole).
	mix    *mixPlan    // a mixture's sources and order
	fields *fieldsPlan // a dataset with fields: a source per field
	nodes  *nodesPlan  // a node-aware mount: a source per part of this node
	// byIndex: a field with blocks of its own, read a block's samples at a time by storage
	// index, with no window or readahead of its own
	byIndex bool
	// autoIndex is the automatic index of shards served in place (DefaultIndexDir), which a
	// read that finds a value out of step with it marks stale; "" otherwise
	autoIndex string
}

// New checks opt, opens the dataset (or, for a mixture, each of its sources) and plans the
// mount. Errors in opt wrap ErrUsage.
func New(opt Options) (*Plan, error) {
	if !opt.RecordClaim {
		return newPlan(opt)
	}
	defer daemon.UnlockPlans()
	p, err := newPlan(opt)
	if err == nil {
		p.recordClaim()
	}
	return p, err
}

// newPlan is New.
func newPlan(opt Options) (*Plan, error) {
	if opt.Epochs == 0 {
		opt.Epochs = bfs.DefaultEpochs
	}
	if err := opt.Check(); err != nil {
		return nil, err
	}
	if opt.Mixture != nil {
		return newMixture(opt)
	}
	man, sd, err := withFields(opt)
	switch {
	case err != nil:
		return nil, err
	case man != nil && opt.Nodes.Nodes > 0:
		return nil, Usagef("%s is for one dataset; %s is a dataset with fields, which is not node-aware yet: mount it whole on each node", optname.Flag("nodes"), opt.Data)
	case man != nil:
		return newFields(opt, man, sd)
	}
	var p *Plan
	if sd != nil {
		p, err = sd.plain(opt)
	} else {
		p, err = openSource(opt)
	}
	if err != nil {
		return nil, err
	}

	if err := p.checkMount([]string{p.ds.Where()}, []*Plan{p}, nil); err != nil {
		return nil, err
	}
	if opt.Nodes.Nodes > 0 {
		err = p.planNodes(opt.Order)
	} else {
		err = p.planCache()
	}
	if err != nil {
		return nil, err
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p, nil
}

// openSource opens the dataset opt names and chooses its order: a mount of it alone, or one
// source of a mixture.
func openSource(opt Options) (*Plan, error) {
	p := &Plan{opt: opt, loc: Locate(opt.Data)}
	switch p.loc.Kind {
	case MixtureFile:
		return nil, Usagef("%s is a mixture file; a mixture's sources are datasets, not mixtures", opt.Data)
	case FieldsDir:
		return nil, Usagef("%s is a dataset with fields; a mixture of datasets with fields is not served yet: mix one of its fields (%s/fields/NAME)", opt.Data, opt.Data)
	case ShardsIndex, Shards:
		// Shards in place of one field (TFRecord files) are one plain dataset.
		man, sd, err := withFields(opt)
		if err != nil {
			return nil, err
		}
		if man != nil {
			return nil, Usagef("%s are shards with fields (%d); a mixture of datasets with fields is not served yet: pack the shards, and mix one of the fields", opt.Data, len(man.Fields))
		}
		return sd.plain(opt)
	}
	if p.loc.Kind == Remote {
		// Defaults filled in once, for the readahead and the workers below and for stores.Open.
		if err := p.opt.S3.Validate(); err != nil {
			return nil, Usagef("%v", err)
		}
	}
	var err error
	if p.ds, err = OpenDataset(p.loc, opt.InPlace, p.opt.S3); err != nil {
		return nil, err
	}
	p.opt.Order, p.order = ChooseOrder(p.ds, p.opt.Order)
	if err := p.opt.Order.Validate(); err != nil {
		return nil, Usagef("%s %d: %v", optname.Flag("mix"), p.opt.Order.Mix, err)
	}
	return p, nil
}

// checkMount checks what every mount checks before it plans, whatever it serves: the mount
// point, resolved (p.mnt), inside none of wheres (the data each source serves); the options a
// /dev/fd/N mount point cannot honour; each of srcs' data against --allow-other (srcs: p
// itself for one dataset, else its sources, whose mnt it sets); and the users lock. wrap, when
// set, names source i in its errors.
func (p *Plan) checkMount(wheres []string, srcs []*Plan, wrap func(i int, err error) error) error {
	if wrap == nil {
		wrap = func(_ int, err error) error { return err }
	}
	for i, where := range wheres {
		mnt, dir, err := daemon.CheckMountpoint(p.opt.Mountpoint, where)
		if err != nil {
			return wrap(i, err)
		}
		if p.mntDir != nil {
			p.mntDir.Close()
		}
		p.mnt, p.mntDir = mnt, dir
	}
	if err := checkFuseFDOptions(p.mnt, p.opt); err != nil {
		return err
	}
	for i, sub := range srcs {
		sub.mnt = p.mnt
		if err := checkAllowOther(p.opt, sub.loc, sub.ds); err != nil {
			return wrap(i, err)
		}
	}
	return p.checkUsers()
}

// checkUsers checks the users lock options.
func (p *Plan) checkUsers() error {
	var err error
	if p.opt.UsersLock != "" {
		if p.opt.UsersLock, err = daemon.CheckUsersLock(p.opt.UsersLock); err != nil {
			return usageError{err} // an option's error, which the options' errors wrap ErrUsage
		}
	} else if p.opt.RemoveMountpoint {
		return Usagef("%s goes with %s FILE (the mountpoint is removed when the last user is gone)", optname.Flag("remove-mountpoint"), optname.Flag("users-lock"))
	}
	return nil
}

// finish checks the disk cache's options and --verify once the memory is planned.
func (p *Plan) finish() error {
	var err error
	if p.disk, err = p.diskOptions(); err != nil {
		return err
	}
	if p.disk != nil {
		p.disk.Direct, p.disk.Streams = p.mem.Direct, p.streams()
	}
	if p.opt.Verify {
		if err := p.ds.Verifiable(); err != nil {
			return Usagef("%s: %v", optname.Flag("verify"), err)
		}
	}
	return nil
}

// streams returns which of the dataset's files are read with O_DIRECT (memory.Plan.Streams; a
// node-aware mount's parts each say for theirs).
func (p *Plan) streams() func(layout.FileID) bool {
	if p.nodes != nil {
		return p.nodes.streams()
	}
	return p.mem.Streams
}

// Warnings returns what the user should hear before the mount starts: an order far from
// uniform.
func (p *Plan) Warnings() []string { return p.shape().warnings(p) }

// planCache sets the readahead, the memory plan and the page cache's options.
func (p *Plan) planCache() error {
	cs, remote := p.opt.CacheSize, p.loc.Kind == Remote
	ra, part := p.planReadahead()
	mem := sysmem.Read()
	p.fitWindow(cs, ra, mem, 1, 0)
	p.need = memory.NeedCache(p.ds, p.opt.Order.Mix, ra, cache.DefaultPageSize)
	if win := p.need.InCache * int64(p.need.Mix); p.opt.Readahead == AutoReadahead && cs > 0 && ra > (cs-win)/2 {
		// A readahead the user did not ask for leaves at least half of the --cache-size they
		// gave, beside the window being read, to blocks already fetched: a block evicted
		// before its reader comes is fetched twice (16 MiB parts, 256 MiB readahead and a
		// 256 MiB cache read at half the rate); and a small --cache-size is not refused for
		// the default readahead's sake. At least one part from an object store, one cache
		// load from local files.
		ra = max(part, min(ra, cache.DefaultMaxRead), (cs-win)/2)
		p.need = memory.NeedCache(p.ds, p.opt.Order.Mix, ra, cache.DefaultPageSize)
	}
	p.readahead = ra
	if need := p.need; cs > 0 && cs < need.Need {
		// Whole pages: a need just over a size must not print as that size.
		upTo := (need.Need + cache.DefaultPageSize - 1) / cache.DefaultPageSize * cache.DefaultPageSize
		fc, fm, fr := optname.Flag("cache-size"), optname.Flag("mix"), optname.Flag("readahead")
		return Usagef("%s %s is too small: it needs %s, the larger of a window of %s %d blocks of up to %s%s plus %s %s (%s) and %d pages of %s (a read holds its pages while the reply is written, and readahead needs room beside it); raise %s or lower %s or %s",
			fc, ibytes(cs), ibytes(upTo), fm, need.Mix, ibytes(need.MaxBlock), inPages(need), fr, ibytes(ra), ibytes(need.Window), cache.MinPages, ibytes(cache.DefaultPageSize), fc, fm, fr)
	}
	claimed := p.claimed(mem, p.loc.Abs, p.ds.Manifest.Fingerprint())
	p.mem = memory.PlanFor(p.ds, cache.DefaultPageSize, cs, p.need.Window, p.opt.Direct, mem, claimed)
	// The order state's share of the budget (view.NewSet reserves it) never leaves the pages
	// less than the windows and readahead need.
	p.cacheOpt = cache.Options{Size: p.mem.CacheSize, Keep: p.need.Need}
	if remote {
		p.planRemote()
	}
	if err := p.cacheOpt.Validate(); err != nil {
		return Usagef("%s: %v", optname.Flag("cache-size"), err)
	}
	return nil
}

// fitWindow lowers an automatic --mix whose window and readahead would take more than half
// the --cache-size given (the rest for the windows of readers at other places, and for blocks
// fetched ahead), or a quarter of the memory less the trainer's share (the memory the
// process has, not what is free at the moment: the order must not depend on what else runs);
// share is the part of those a source of a mixture has (1 for a mount of one dataset);
// perBlock what a block of the window takes of the cache (0: the dataset's largest block, in
// pages; a dataset with fields: that of every field together).
// The cache takes twice the window and readahead where it can (memory.PlanFor), so the automatic
// window never leaves less than half the budget to the blocks kept resident.
func (p *Plan) fitWindow(cs, ra int64, mem sysmem.Memory, share float64, perBlock int64) {
	if !p.order.Auto || p.opt.Order.Mix <= 1 {
		return
	}
	room, what := cs/2, "half the "+optname.Flag("cache-size")+", "+ibytes(cs/2)
	if cs == 0 {
		total := mem.Total()
		if total <= 0 {
			return
		}
		room = (total - memory.Headroom(total)) / 4
		what = fmt.Sprintf("a quarter of %s less a trainer's share (%s)", mem.Source(), ibytes(room))
	}
	if share < 1 {
		room = int64(float64(room) * share)
		what += fmt.Sprintf(", of which this source's share of the mixture is %.0f%% (%s)", 100*share, ibytes(room))
	}
	if perBlock == 0 {
		perBlock = memory.NeedCache(p.ds, 1, 0, cache.DefaultPageSize).InCache
	}
	if perBlock <= 0 {
		return // blocks of no bytes (every record empty): any window fits
	}
	if fit := (room - ra) / perBlock; fit < int64(p.opt.Order.Mix) {
		p.order.lower(p.ds, &p.opt.Order, int(max(1, fit)), "the window and readahead must fit "+what)
	}
}

// inPages says what a block takes of the cache when that is more than its size.
func inPages(n memory.CacheNeed) string {
	if n.InCache == n.MaxBlock {
		return ""
	}
	return fmt.Sprintf(" (%s each in the cache's pages)", ibytes(n.InCache))
}

// planReadahead returns the readahead, and the object store's part size when the readahead
// was derived from it rather than given.
func (p *Plan) planReadahead() (ra, part int64) {
	if p.opt.Readahead != AutoReadahead {
		return p.opt.Readahead, 0
	}
	ra = DefaultReadahead
	if p.loc.Kind == Remote {
		// From an object store the readahead is what keeps the GETs in flight: by default
		// twice that many parts ahead (128 MiB with the defaults), of the store's bytes: for
		// compressed blocks, that many bytes stored (up to 4 times as many served).
		if o := p.opt.S3; 2*int64(o.Concurrency)*o.PartSize > ra {
			return storedAhead(p.ds, 2*int64(o.Concurrency)*o.PartSize), o.PartSize
		}
	}
	return ra, 0
}

// storedAhead returns a readahead of ra bytes of the store's, in the bytes ds serves: ra, or
// for compressed blocks ra over their ratio (at most 4 ra).
func storedAhead(ds *layout.Dataset, ra int64) int64 {
	if ds == nil {
		return ra
	}
	if c, stored, raw := ds.Compression(); c != nil && stored > 0 && stored < raw {
		return min(int64(float64(ra)*float64(raw)/float64(stored)), 4*ra)
	}
	return ra
}

// planRemote adapts the plan to an object store. A load takes the whole block file where the
// cache has room for it (cache.Options.Whole), so the object is fetched once, in ranged GETs of
// the part size, into the cache's own pages, and its CRC32C checked before any of them is
// served; one worker per request in flight keeps the GETs busy. A compressed block's load
// decompresses it after its GET, on the worker: twice as many workers keep the GETs in
// flight while others decompress (the store's pool still bounds the GETs).
func (p *Plan) planRemote() {
	if p.opt.DiskCache == "" {
		// No local files for the kernel to keep: the cache is all the memory there is.
		p.mem.Direct, p.mem.Reason = false, "an object store"
		p.mem.Resident, p.mem.ResidentBlocks = 0, 0
	} else {
		p.mem.Reason = "the disk cache's reads: " + p.mem.Reason
	}
	maxRead := min(max(p.need.MaxBlock, cache.DefaultMaxRead)+cache.DefaultPageSize-1, maxRemoteRead)
	p.cacheOpt.MaxRead = int(maxRead / cache.DefaultPageSize * cache.DefaultPageSize)
	p.cacheOpt.Workers = p.opt.S3.Concurrency
	if p.ds != nil && p.ds.Compressed() {
		p.cacheOpt.Workers *= 2
	}
	p.cacheOpt.Whole = true
}
