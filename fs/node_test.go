package fs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/cache"
	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/source/local"
	"github.com/blockfs/blockfs/source/stack"
	"github.com/blockfs/blockfs/view"
)

// These tests drive the nodes through go-fuse's request bridge (fs.NewNodeFS), as the kernel
// would, but in-process and without a mount: lookup, readdir, open, read and the errno of each
// kind of failure. test/ runs the same paths through a real mount.

// nodeFS is a blockfs tree served by the bridge, with no kernel.
type nodeFS struct {
	raw  fuse.RawFileSystem
	root *dirNode
	ds   *layout.Dataset
}

const rootID = 1

func newNodeFS(t *testing.T, ds *layout.Dataset, src source.Blocks, opt shuffle.Options) *nodeFS {
	t.Helper()
	c, err := cache.New(src, cache.Options{Size: 64 * 4096, PageSize: 4096, MaxRead: 16384})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	set, err := view.NewSet(ds, c, view.SetOptions{Order: opt})
	require.NoError(t, err)
	m, err := newMount(set, Options{Epochs: 3})
	require.NoError(t, err)
	root := m.root().(*dirNode)
	return &nodeFS{raw: gofs.NewNodeFS(root, &gofs.Options{}), root: root, ds: ds}
}

// lookup resolves a path from the root and returns its node id and attributes.
func (f *nodeFS) lookup(path string) (uint64, fuse.Attr, fuse.Status) {
	id := uint64(rootID)
	var out fuse.EntryOut
	for _, name := range strings.Split(path, "/") {
		out = fuse.EntryOut{}
		if st := f.raw.Lookup(nil, &fuse.InHeader{NodeId: id}, name, &out); !st.Ok() {
			return 0, fuse.Attr{}, st
		}
		id = out.NodeId
	}
	return id, out.Attr, fuse.OK
}

// read opens path and reads [off, off+n) with one request; cancel, when closed, interrupts it.
func (f *nodeFS) read(t *testing.T, path string, off, n int64, cancel <-chan struct{}) ([]byte, fuse.Status) {
	t.Helper()
	id, _, st := f.lookup(path)
	require.True(t, st.Ok(), "lookup %s: %v", path, st)
	var oo fuse.OpenOut
	st = f.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: id}, Flags: syscall.O_RDONLY}, &oo)
	require.True(t, st.Ok(), "open %s: %v", path, st)
	defer f.raw.Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: id}, Fh: oo.Fh})
	buf := make([]byte, n)
	res, st := f.raw.Read(cancel, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: id}, Fh: oo.Fh, Offset: uint64(off), Size: uint32(n)}, buf)
	if !st.Ok() {
		return nil, st
	}
	defer res.Done()
	data, st := res.Bytes(make([]byte, n))
	return append([]byte(nil), data...), st
}

func (f *nodeFS) readAll(t *testing.T, path string, size int64) []byte {
	var all []byte
	for off := int64(0); off < size; off += 5000 {
		b, st := f.read(t, path, off, 5000, nil)
		require.True(t, st.Ok(), "read %s at %d: %v", path, off, st)
		all = append(all, b...)
	}
	return all
}

func fixedDataset(t *testing.T) (*dstest.Dataset, *layout.Dataset) {
	d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 300, 100, 2000, true) // 20 per block, 15 blocks
	ds, err := local.Open(d.Dir)
	require.NoError(t, err)
	return d, ds
}

// TestNodeTree: the root lists the listed epochs with sidecars and .blockfs; lookups give each
// file its exact size without reading data; names that are not in the tree are ENOENT.
func TestNodeTree(t *testing.T) {
	_, ds := fixedDataset(t)
	f := newNodeFS(t, ds, local.New(ds, false), shuffle.Options{Seed: 1, Mode: shuffle.Full})

	stream, errno := f.root.Readdir(context.Background())
	require.Zero(t, errno)
	var names []string
	for stream.HasNext() {
		e, errno := stream.Next()
		require.Zero(t, errno)
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"epoch-0000", "epoch-0000.ids", "epoch-0001", "epoch-0001.ids", "epoch-0002", "epoch-0002.ids", ".blockfs"}, names)

	for path, want := range map[string]uint64{
		"epoch-0000": 300 * 100, "epoch-0007.ids": 300 * 8, "epoch-123456": 300 * 100,
		"shard-1-of-7/epoch-0002": 42 * 100, "shard-6-of-7/epoch-0002.ids": 42 * 8,
	} {
		_, attr, st := f.lookup(path)
		require.True(t, st.Ok(), "%s: %v", path, st)
		assert.EqualValues(t, want, attr.Size, path)
		assert.EqualValues(t, fuse.S_IFREG|0o444, attr.Mode, path)
	}
	for _, path := range []string{"epoch-0000.offsets", "nope", "shard-7-of-7", "shard-1-of-7/shard-1-of-2", "epoch-00x1", ".blockfs/nope"} {
		_, _, st := f.lookup(path)
		assert.Equal(t, fuse.ENOENT, st, path)
	}
	assert.Zero(t, f.root.m.set.(*view.Set).Cache.Stats().DiskReads, "lookups read no data")

	info, st := f.read(t, ".blockfs/info.json", 0, 1<<16, nil)
	require.True(t, st.Ok())
	var facts map[string]any
	require.NoError(t, json.Unmarshal(info, &facts))
	assert.EqualValues(t, 300, facts["records"])
}

// TestNodeRead: reads through the nodes give the epoch's bytes and ids as docs/SHUFFLE.md
// defines them, for the whole epoch and for a shard.
func TestNodeRead(t *testing.T) {
	d, ds := fixedDataset(t)
	opt := shuffle.Options{Seed: 9, Mode: shuffle.Full, Mix: 2}
	f := newNodeFS(t, ds, local.New(ds, false), opt)
	for _, c := range []struct {
		path       string
		start, end uint64
	}{{"epoch-0004", 0, 300}, {"shard-2-of-3/epoch-0004", 200, 300}} {
		o := opt
		o.Epoch = 4
		data, ids, _ := d.Epoch(o, c.start, c.end)
		assert.True(t, bytes.Equal(data, f.readAll(t, c.path, int64(len(data)))), c.path)
		assert.True(t, bytes.Equal(ids, f.readAll(t, c.path+".ids", int64(len(ids)))), c.path+".ids")
	}
	b, st := f.read(t, "epoch-0000", 300*100, 100, nil)
	require.True(t, st.Ok())
	assert.Empty(t, b, "a read at the end is empty")
}

// TestPublishedNames: the names .blockfs/info.json publishes under "tree" are exactly these,
// and resolve in the mount as a client builds paths from them: printf patterns (Python's
// "epoch-%04d" % 3), the sidecar suffix, a shard directory by the floor rule, the meta files.
func TestPublishedNames(t *testing.T) {
	d, ds := fixedDataset(t)
	opt := shuffle.Options{Seed: 4, Mode: shuffle.Full}
	f := newNodeFS(t, ds, local.New(ds, false), opt)
	info, st := f.read(t, ".blockfs/info.json", 0, 1<<16, nil)
	require.True(t, st.Ok())
	var facts struct {
		Tree map[string]string `json:"tree"`
	}
	require.NoError(t, json.Unmarshal(info, &facts))
	tree := facts.Tree
	assert.Equal(t, map[string]string{"epoch": "epoch-%04d", "shard_dir": "shard-%d-of-%d", "ids": ".ids", "offsets": ".offsets",
		"meta_dir": ".blockfs", "info": "info.json", "stats": "stats.json", "names": "names.txt", "shard_rule": "floor"}, tree)

	ids := fmt.Sprintf(tree["epoch"], 3) + tree["ids"]
	o := opt
	o.Epoch = 3
	_, want, _ := d.Epoch(o, 0, 300)
	assert.Equal(t, want, f.readAll(t, ids, int64(len(want))), ids)
	shard := fmt.Sprintf(tree["shard_dir"], 2, 7) + "/" + ids // floor: [2*42, 3*42) of 300
	_, want, _ = d.Epoch(o, 84, 126)
	assert.Equal(t, want, f.readAll(t, shard, int64(len(want))), shard)
	for _, name := range []string{tree["info"], tree["stats"]} {
		_, _, st := f.lookup(tree["meta_dir"] + "/" + name)
		assert.True(t, st.Ok(), name)
	}
}

// faultySource fails reads of one block's data file with err, and can hold reads until released.
type faultySource struct {
	source.Blocks
	bad  layout.FileID
	err  error
	gate chan struct{} // when non-nil, reads of bad wait for it instead of failing
}

func (s *faultySource) Fill(ctx context.Context, id source.FileID, off int64, bufs [][]byte, how source.Read) error {
	if id == s.bad {
		if s.gate != nil {
			<-s.gate
		} else {
			return s.err
		}
	}
	return s.Blocks.Fill(ctx, id, off, bufs, how)
}

// captureLog collects the package's log lines for the test.
func captureLog(t *testing.T) *bytes.Buffer {
	var buf bytes.Buffer
	log.SetOutput(&buf)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	return &buf
}

// TestNodeErrno: each kind of failure reaches the reader as its own errno, with its own log
// line naming the request and the file: EMFILE (the daemon is out of descriptors), EIO from the
// disk, a CRC mismatch (corruption), a file gone; other blocks keep working.
func TestNodeErrno(t *testing.T) {
	d, ds := fixedDataset(t)
	opt := shuffle.Options{Mode: shuffle.None} // block b is bytes [2000b, 2000b+2000) of every epoch
	blk := filepath.Join(d.Dir, "blocks", "000003.bin")
	cases := []struct {
		name      string
		err       error
		corrupt   bool // flip a byte of block 3 and verify checksums instead
		wantErrno fuse.Status
		wantLog   string
	}{
		{name: "EMFILE", err: &source.Error{Op: "open", Name: blk, Off: -1, Err: syscall.EMFILE},
			wantErrno: fuse.Status(syscall.EMFILE), wantLog: "out of file descriptors"},
		{name: "EIO", err: &source.Error{Op: "read", Name: blk, Off: 4096, Err: syscall.EIO},
			wantErrno: fuse.EIO, wantLog: "I/O error from the disk"},
		{name: "gone", err: &source.Error{Op: "open", Name: blk, Off: -1, Err: syscall.ENOENT},
			wantErrno: fuse.EIO, wantLog: "a dataset file is gone"},
		{name: "short", err: &source.Error{Op: "read", Name: blk, Off: 1000, Err: source.ErrShort},
			wantErrno: fuse.EIO, wantLog: "corrupt dataset"},
		{name: "CRC mismatch", corrupt: true, wantErrno: fuse.EIO, wantLog: "corrupt dataset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var src source.Blocks = &faultySource{Blocks: local.New(ds, false), bad: layout.DataFile(3), err: c.err}
			if c.corrupt {
				d := dstest.Fixed(t, filepath.Join(t.TempDir(), "ds"), 300, 100, 2000, true)
				p := filepath.Join(d.Dir, "blocks", "000003.bin")
				raw, err := os.ReadFile(p)
				require.NoError(t, err)
				raw[17] ^= 0xff
				require.NoError(t, os.WriteFile(p, raw, 0o644))
				ds, err = local.Open(d.Dir)
				require.NoError(t, err)
				src, err = stack.NewVerified(ds, local.New(ds, false))
				require.NoError(t, err)
			}
			logs := captureLog(t)
			f := newNodeFS(t, ds, src, opt)
			_, st := f.read(t, "epoch-0000", 3*2000+10, 100, nil)
			assert.Equal(t, c.wantErrno, st)
			assert.Contains(t, logs.String(), c.wantLog)
			assert.Contains(t, logs.String(), "000003.bin", "the log line names the file")
			assert.Contains(t, logs.String(), "epoch-0000 at 6010", "and the request")
			assert.Equal(t, 1, bytes.Count(logs.Bytes(), []byte("\n")), "one line: %s", logs)
			b, st := f.read(t, "epoch-0000", 2*2000, 2000, nil)
			assert.True(t, st.Ok(), "other blocks keep working")
			assert.Len(t, b, 2000)
		})
	}
}

// TestNodeInterrupted: a reader interrupted while another request loads the page it needs gets
// EINTR at once, with no log line; the loading request still completes.
func TestNodeInterrupted(t *testing.T) {
	_, ds := fixedDataset(t)
	src := &faultySource{Blocks: local.New(ds, false), bad: layout.DataFile(3), gate: make(chan struct{})}
	logs := captureLog(t)
	f := newNodeFS(t, ds, src, shuffle.Options{Mode: shuffle.None})
	var wg sync.WaitGroup
	wg.Add(1)
	var first fuse.Status
	go func() {
		defer wg.Done()
		_, first = f.read(t, "epoch-0000", 3*2000, 100, nil) // loads block 3, held at the gate
	}()
	time.Sleep(100 * time.Millisecond)
	cancel := make(chan struct{})
	close(cancel)
	start := time.Now()
	_, st := f.read(t, "epoch-0000", 3*2000+50, 100, cancel)
	assert.Equal(t, fuse.EINTR, st)
	assert.Less(t, time.Since(start), 2*time.Second)
	close(src.gate)
	wg.Wait()
	assert.True(t, first.Ok(), "the loading read completes: %v", first)
	assert.Empty(t, logs.String())
}
