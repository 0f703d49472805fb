package fs

import (
	"context"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/blockfs/blockfs/view"
)

// dirNode is the root (root true: epochs of the whole order, shard directories, .blockfs) or a
// shard directory (slice r of w of every epoch).
type dirNode struct {
	gofs.Inode
	m    *mount
	root bool
	r, w uint64
}

func (d *dirNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.m.dirAttr(&out.Attr)
	return 0
}

func (d *dirNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// Lookup resolves any epoch number and, at the root, any valid shard-R-of-W and .blockfs.
// Everything else is ENOENT.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if epoch, kind, ok := view.ParseEpochFileOf(d.m.set, name); ok {
		return d.lookupEpoch(ctx, epoch, kind, out)
	}
	if !d.root {
		return nil, syscall.ENOENT
	}
	if r, w, ok := view.ParseShardDir(name); ok {
		d.m.dirAttr(&out.Attr)
		return d.NewInode(ctx, &dirNode{m: d.m, r: r, w: w}, gofs.StableAttr{Mode: fuse.S_IFDIR}), 0
	}
	if name == view.MetaDir {
		d.m.dirAttr(&out.Attr)
		return d.NewInode(ctx, &metaNode{m: d.m}, gofs.StableAttr{Mode: fuse.S_IFDIR}), 0
	}
	return nil, syscall.ENOENT
}

func (d *dirNode) lookupEpoch(ctx context.Context, epoch uint64, kind view.Kind, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n := &fileNode{m: d.m, epoch: epoch, kind: kind, root: d.root, r: d.r, w: d.w}
	rg, err := n.rangeOf()
	if err != nil {
		return nil, toErrno(err, "epoch "+view.EpochName(epoch))
	}
	size, err := d.m.set.FileSize(ctx, epoch, kind, rg)
	if err != nil {
		return nil, toErrno(err, "epoch "+view.EpochName(epoch))
	}
	n.size = size
	n.attr(&out.Attr)
	return d.NewInode(ctx, n, gofs.StableAttr{Mode: fuse.S_IFREG}), 0
}

// Readdir lists the first Options.Epochs epochs with their sidecars and, at the root, .blockfs.
func (d *dirNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return &epochStream{m: d.m, root: d.root}, 0
}

// epochStream lists directory entries lazily, so a large --epochs costs no memory.
type epochStream struct {
	m    *mount
	root bool
	i    uint64 // next entry index
}

func (s *epochStream) perEpoch() uint64 { return uint64(len(s.m.set.Kinds())) }

func (s *epochStream) total() uint64 {
	n := s.m.opt.Epochs * s.perEpoch()
	if s.root {
		n++
	}
	return n
}

func (s *epochStream) HasNext() bool { return s.i < s.total() }

func (s *epochStream) Next() (fuse.DirEntry, syscall.Errno) {
	i := s.i
	s.i++
	if s.root && i == s.total()-1 {
		return fuse.DirEntry{Name: view.MetaDir, Mode: fuse.S_IFDIR}, 0
	}
	// Each epoch's files in the order Kinds gives: data, ids, then the others it has.
	name := view.EpochName(i/s.perEpoch()) + s.m.set.Suffix(s.m.set.Kinds()[i%s.perEpoch()])
	return fuse.DirEntry{Name: name, Mode: fuse.S_IFREG}, 0
}

func (s *epochStream) Close() {}

// fileNode is an epoch or shard file or sidecar. It keeps what names the file, not the
// epoch's tables: the kernel may remember many inodes, and only open files pin an epoch.
type fileNode struct {
	gofs.Inode
	m     *mount
	epoch uint64
	kind  view.Kind
	root  bool   // the whole epoch; else shard r of w
	r, w  uint64 // the shard
	size  int64
	fixed view.File // a file that is not an epoch's (names.txt), or nil
	drop  dropper   // what of the file readers have passed, to drop from the kernel's cache
}

// rangeOf returns the positions of the epoch that the file covers: all, or its shard's.
func (n *fileNode) rangeOf() (view.Range, error) {
	records, err := n.m.set.Records(n.epoch)
	if err != nil || n.root {
		return view.Range{Start: 0, End: records}, err
	}
	return view.ShardRange(records, n.r, n.w), nil
}

// open builds the view file: the epoch from the mount's set, then the range and kind.
func (n *fileNode) open(ctx context.Context) (view.File, syscall.Errno) {
	if n.fixed != nil {
		return n.fixed, 0
	}
	rg, err := n.rangeOf()
	if err != nil {
		return nil, toErrno(err, "epoch "+view.EpochName(n.epoch))
	}
	f, err := n.m.set.Open(ctx, n.epoch, n.kind, rg)
	if err != nil {
		return nil, toErrno(err, "epoch "+view.EpochName(n.epoch))
	}
	return f, 0
}

func (n *fileNode) attr(a *fuse.Attr) {
	n.m.fileAttr(a, uint64(n.size))
}

func (n *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.attr(&out.Attr)
	return 0
}

func (n *fileNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// Open refuses writers and gives each reader its own readahead state. The contents never
// change, so the kernel may keep its page cache across opens. A reader that opens with
// O_DIRECT (a loader that reads large batches once) gets FOPEN_DIRECT_IO: its reads are
// answered straight into its buffers, with no copy through the page cache and nothing there
// to drop behind it. (The kernel's own O_DIRECT path, with CAP_ASYNC_DIO, would send a large
// read's requests all at once, at twice the rate on 2 cores, but waits for them
// uninterruptibly: a reader killed while the store stalls would hang until the daemon gives
// up, where FOPEN_DIRECT_IO's requests are interrupted at once.)
func (n *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	f, errno := n.open(ctx)
	if errno != 0 {
		return nil, 0, errno
	}
	ahead := view.ReadaheadOf(n.m.set, n.kind, n.m.opt.Readahead)
	h := &handle{r: view.NewReader(f, ahead), pos: -1, direct: flags&syscall.O_DIRECT != 0,
		rd: n.m.times.open(ctx, n.Path(nil), f.Size(), n.kind == view.Data)}
	if h.direct {
		// KEEP_CACHE too: without it the kernel drops the file's cached pages at every open,
		// those of the buffered readers of the same file included.
		return h, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_KEEP_CACHE, 0
	}
	n.drop.opened(h)
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// Release forgets the handle; once no handle has been open for closeDropDelay, the file's
// pages are dropped from the kernel's cache.
func (n *fileNode) Release(ctx context.Context, fh gofs.FileHandle) syscall.Errno {
	h, ok := fh.(*handle)
	if ok && h.rd != nil {
		n.m.times.close(h.rd)
	}
	if !ok || h.direct {
		return 0
	}
	if last, closes := n.drop.closed(h); last {
		time.AfterFunc(closeDropDelay, func() { n.drop.dropIfIdle(n.m.inval, &n.Inode, closes) })
	}
	return 0
}

// handle is one open file: its reader, whether it was opened with O_DIRECT (immutable), and
// where its last read ended (-1 before the first; guarded by the node's dropper, which tracks
// only handles that read through the page cache).
type handle struct {
	r      *view.Reader
	pos    int64
	direct bool
	rd     *reader // its counters in stats.json's readers
}

// Read serves [off, off+len(dest)) clamped to the file; reads at or past the end return 0 bytes.
// Epoch data is answered straight from the pinned cache pages (writev of the records, no copy
// into dest) unless it is in more pieces than one writev takes.
func (n *fileNode) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*handle)
	if !ok {
		return nil, syscall.EBADF
	}
	n.m.reads.Add(1)
	g := view.NewGather()
	var got int
	var err error
	start, took, waited := timedRead(func(w *view.Waits) { got, err = h.r.Gather(ctx, w, g, dest, off) })
	n.m.times.read(h.rd, start, took, waited, off+int64(got), got)
	if n.m.opt.OnRead != nil {
		n.m.opt.OnRead(took, waited)
	}
	if err != nil {
		g.Release()
		errno, _ := n.m.readFailed(err, n.Path(nil), off, false)
		return nil, errno
	}
	n.m.served[n.kind.Stat()].Add(uint64(got))
	if !h.direct {
		n.drop.read(n.m.inval, &n.Inode, h, off+int64(got))
	}
	if got == 0 || len(g.Vecs) > view.MaxVecs || g.InBuf(dest) {
		if !g.InBuf(dest) {
			g.CopyTo(dest)
		}
		g.Release()
		return fuse.ReadResultData(dest[:got]), 0
	}
	return &vecResult{g: g, n: got}, 0
}

// vecResult is a FUSE read reply written with writev straight from pinned cache pages (go-fuse
// uses Slices when a result has it); Done, called once the reply is written, unpins them.
type vecResult struct {
	g *view.Gather
	n int
}

func (r *vecResult) Size() int { return r.n }

func (r *vecResult) Slices() ([][]byte, fuse.Status) { return r.g.Vecs, fuse.OK }

func (r *vecResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	if cap(buf) < r.n {
		buf = make([]byte, r.n)
	}
	return buf[:r.g.CopyTo(buf[:r.n])], fuse.OK
}

func (r *vecResult) Done() {
	if r.g != nil {
		r.g.Release()
		r.g = nil
	}
}

// metaNode is the .blockfs directory: info.json (fixed) and stats.json (live).
type metaNode struct {
	gofs.Inode
	m *mount
}

func (d *metaNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.m.dirAttr(&out.Attr)
	return 0
}

// Lookup resolves info.json (fixed, built at mount: a gofs.MemRegularFile, which the
// read-only mount keeps from being written), stats.json (live) and names.txt (if the dataset
// has names).
func (d *metaNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	var node gofs.InodeEmbedder
	switch name {
	case view.InfoName:
		n := &gofs.MemRegularFile{Data: d.m.info}
		d.m.fileAttr(&n.Attr, uint64(len(n.Data)))
		out.Attr, node = n.Attr, n
	case view.NamesName:
		f, ok := d.m.set.OpenNames()
		if !ok {
			return nil, syscall.ENOENT
		}
		n := &fileNode{m: d.m, fixed: f, kind: view.Names, size: f.Size()}
		n.attr(&out.Attr)
		node = n
	case view.StatsName:
		d.m.fileAttr(&out.Attr, uint64(len(d.m.statsJSON())))
		out.SetEntryTimeout(0)
		out.SetAttrTimeout(0)
		node = &statsNode{m: d.m}
	default:
		return nil, syscall.ENOENT
	}
	return d.NewInode(ctx, node, gofs.StableAttr{Mode: fuse.S_IFREG}), 0
}

func (d *metaNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ents := []fuse.DirEntry{{Name: view.InfoName, Mode: fuse.S_IFREG}, {Name: view.StatsName, Mode: fuse.S_IFREG}}
	if _, ok := d.m.set.OpenNames(); ok {
		ents = append(ents, fuse.DirEntry{Name: view.NamesName, Mode: fuse.S_IFREG})
	}
	return gofs.NewListDirStream(ents), 0
}

// statsNode is .blockfs/stats.json, generated at each open and read with direct I/O, so that
// every open sees fresh figures (which gofs.MemRegularFile, fixed and kept in the kernel's
// cache, cannot do).
type statsNode struct {
	gofs.Inode
	m *mount
}

// statsHandle is one open of stats.json: the figures at the open.
type statsHandle struct{ data []byte }

func (n *statsNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var data []byte
	if h, ok := fh.(*statsHandle); ok {
		data = h.data
	} else {
		data = n.m.statsJSON()
	}
	n.m.fileAttr(&out.Attr, uint64(len(data)))
	out.SetTimeout(0)
	return 0
}

func (n *statsNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	return &statsHandle{data: n.m.statsJSON()}, fuse.FOPEN_DIRECT_IO, 0
}

func (n *statsNode) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*statsHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(h.data)))
	return fuse.ReadResultData(h.data[off:end]), 0
}

func (n *statsNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (m *mount) dirAttr(a *fuse.Attr) {
	a.Mode = fuse.S_IFDIR | 0o555
	m.setOwner(a)
}

func (m *mount) fileAttr(a *fuse.Attr, size uint64) {
	a.Mode = fuse.S_IFREG | 0o444
	a.Size = size
	a.Blocks = (size + 511) / 512
	a.Blksize = 1 << 20
	m.setOwner(a)
}

func (m *mount) setOwner(a *fuse.Attr) {
	a.Nlink = 1
	a.Owner = fuse.Owner{Uid: m.uid, Gid: m.gid}
	t := m.mtime
	a.SetTimes(&t, &t, &t)
}
