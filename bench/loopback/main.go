// Command loopback is the benchmark's baseline daemon: it serves the given files concatenated
// as MOUNTPOINT/data through FUSE, with blockfs's mount options, until SIGINT/SIGTERM.
//
//	loopback MOUNTPOINT FILE...
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	bfs "github.com/blockfs/blockfs/fs"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: loopback MOUNTPOINT FILE...")
		os.Exit(2)
	}
	srv, err := mountConcat(os.Args[1], os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopback:", err)
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		if err := srv.Unmount(); err != nil {
			_ = syscall.Unmount(os.Args[1], syscall.MNT_DETACH)
		}
	}()
	srv.Wait()
}

// mountConcat mounts, read-only at mountpoint, one file "data" that is the given files
// concatenated, served by pread in Read with blockfs's own mount options and kernel readahead.
// It is the benchmark's baseline: what any daemon-served FUSE file costs on this machine.
func mountConcat(mountpoint string, files []string) (*fuse.Server, error) {
	mnt, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	c := &concatFile{}
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			c.close()
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			c.close()
			return nil, err
		}
		c.files = append(c.files, f)
		c.starts = append(c.starts, c.size)
		c.size += st.Size()
	}
	root := &concatRoot{file: c}
	srv, err := gofs.Mount(mnt, root, bfs.MountOptions("concat", uint32(os.Getuid()), uint32(os.Getgid()), false, false))
	if err != nil {
		c.close()
		return nil, fmt.Errorf("cannot mount at %s: %w", mnt, err)
	}
	bfs.RaiseReadahead(mnt)
	return srv, nil
}

type concatRoot struct {
	gofs.Inode
	file *concatFile
}

func (r *concatRoot) OnAdd(ctx context.Context) {
	ch := r.NewPersistentInode(ctx, r.file, gofs.StableAttr{Mode: fuse.S_IFREG})
	r.AddChild("data", ch, false)
}

type concatFile struct {
	gofs.Inode
	files  []*os.File
	starts []int64
	size   int64
}

func (c *concatFile) close() {
	for _, f := range c.files {
		f.Close()
	}
}

func (c *concatFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = fuse.S_IFREG | 0o444
	out.Size = uint64(c.size)
	return 0
}

func (c *concatFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (c *concatFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= c.size {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), c.size)
	n := 0
	for pos := off; pos < end; {
		i := sort.Search(len(c.starts), func(i int) bool { return c.starts[i] > pos }) - 1
		fileEnd := c.size
		if i+1 < len(c.starts) {
			fileEnd = c.starts[i+1]
		}
		k, err := c.files[i].ReadAt(dest[n:n+int(min(end, fileEnd)-pos)], pos-c.starts[i])
		if err != nil && k == 0 {
			return nil, syscall.EIO
		}
		n += k
		pos += int64(k)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

var (
	_ = (gofs.NodeOnAdder)((*concatRoot)(nil))
	_ = (gofs.NodeGetattrer)((*concatFile)(nil))
	_ = (gofs.NodeOpener)((*concatFile)(nil))
	_ = (gofs.NodeReader)((*concatFile)(nil))
)
