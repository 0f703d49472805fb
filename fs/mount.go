// Package fs serves a view.Set as a read-only FUSE filesystem: epoch files, their sidecars,
// shard directories and the .blockfs directory. It is the only package that imports go-fuse;
// everything it serves comes from package view.
package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/view"
)

// Options configure a mount. Zero fields take the stated defaults.
type Options struct {
	Epochs     uint64         // epoch files listed in directories; default 100 (any resolves)
	Readahead  int64          // bytes of epoch order prefetched ahead of each reader; 0 disables
	AllowOther bool           // let other users read (needs user_allow_other for non-root)
	Debug      bool           // log every FUSE request
	Info       map[string]any // extra facts for .blockfs/info.json
	// Stats, when set, returns .blockfs/stats.json's bytes given the FUSE layer's counters now
	// (package mount composes them with the cache's, the sources' and the stores': report.Stats).
	// Called at each lookup, stat and open of stats.json, from any goroutine. Without it, or
	// when it fails (logged), stats.json is the counters alone.
	Stats func(Counters) ([]byte, error)
	// OnRead, when set, is told of every read: how long it took in the daemon and how long
	// of that it waited for loads (the metrics' histograms).
	OnRead func(took, waited time.Duration)
	// OnFailure, when set, is told of every failed read that the daemon logs: its error and
	// the reason logged.
	OnFailure func(err error, reason string)
	// NoShm turns the shared-memory read path off (docs/SHM.md): info.json names no socket,
	// and readers use the files.
	NoShm bool
	// MaxBackground, when above 0, is the kernel's FUSE requests in flight for readahead
	// (DefaultMaxBackground otherwise).
	MaxBackground int
	// FuseReaders, when above 0, is how many FUSE requests the daemon reads and serves at once
	// (go-fuse's otherwise: one a CPU, at most 16), bounded through go-fuse's request bytes.
	FuseReaders int
	// MountDir, when set, is the mount point's directory as its check opened it: as root, the
	// mount is made through it (mount_dir.go), not through the path. Mount does not close it.
	MountDir *os.File
}

// ShmSocketKey is the key of info.json that names the shared-memory path's socket.
const ShmSocketKey = "shm_socket"

// Type is the mount's subtype: mountinfo lists it as "fuse.blockfs".
const Type = "blockfs"

// DefaultEpochs is how many epochs a directory lists.
const DefaultEpochs = 100

// DefaultMaxBackground is the kernel's FUSE requests in flight for readahead. Each holds a
// 1 MiB reply buffer on the daemon's heap while it is served: 16 keeps them within the daemon's
// constant (64 took four readers' peak RSS past it) and serves as fast on 2 cores; on 16
// cores, 64 and 256 were slower at 16 readers (docs/PERFORMANCE.md).
const DefaultMaxBackground = 16

// MaxEpochs is the most epochs a directory may list. ls looks up every entry it lists, and the
// kernel keeps an inode for each (in the daemon too), so a listing must stay small whatever
// the training length: any epoch can be opened by name beyond it.
const MaxEpochs = 10000

// Server is a mounted blockfs.
type Server struct {
	*fuse.Server
	Mountpoint string
	m          *mount
	// own is the directory mountOn mounted on, for a mount made so (go-fuse serves it as a
	// /dev/fd/N it cannot unmount): Unmount, Detach and RemoveDir go through it. ownMu
	// guards it (a signal's Unmount and the users lock's Detach may meet); gone: unmounted.
	ownMu sync.Mutex
	own   *os.File // nil once Stop has closed it
	byDir bool     // own was given
	gone  bool
}

// mount is the state shared by all nodes of one mount. Immutable after Mount except counters.
type mount struct {
	set   view.Content
	opt   Options
	uid   uint32
	gid   uint32
	mtime time.Time
	info  []byte

	inval *invalidator // drops what readers have passed from the kernel's page cache

	served [view.NumKinds]atomic.Uint64 // bytes returned to readers, by view.Kind
	reads  atomic.Uint64                // FUSE read requests answered
	failed failures                     // why they failed, for stats.json
	times  readTimes                    // where reads' time went, and the open readers
	start  time.Time                    // when the mount was made
	shm    atomic.Pointer[shmServer]    // the shared-memory path, once it serves; nil without
}

// Mount mounts set at mountpoint and returns once the kernel has the mount ready. A mountpoint
// /dev/fd/N (FuseFD) is a connection a privileged parent has mounted already: Mount serves it.
func Mount(mountpoint string, set view.Content, opt Options) (*Server, error) {
	mnt, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	var shm *shmServer
	if !opt.NoShm && shmSupported() {
		// Listening first, so that info.json names the socket.
		if shm, err = listenShm(); err != nil {
			return nil, err
		}
		opt.Info = maps.Clone(opt.Info)
		if opt.Info == nil {
			opt.Info = map[string]any{}
		}
		opt.Info[ShmSocketKey] = shm.addr
	}
	m, err := newMount(set, opt)
	if err != nil {
		shm.stop()
		return nil, err
	}
	served := false // from then on the Server stops the drop's workers (Stop)
	defer func() {
		if !served {
			m.inval.stop()
		}
	}()
	fopt := MountOptions(set.Dir(), m.uid, m.gid, opt.AllowOther, opt.Debug)
	if opt.MaxBackground > 0 {
		fopt.MaxBackground = opt.MaxBackground
	}
	if opt.FuseReaders > 0 {
		// go-fuse reserves a request buffer (MaxRequest and a few KiB of header and alignment)
		// before each read of /dev/fuse: room for FuseReaders of them and no more.
		fopt.MaxInflightRequestBytes = opt.FuseReaders * (MaxRequest + 32<<10)
	}
	srv, own, err := serveFUSE(mnt, m.root(), fopt, opt)
	if err != nil {
		shm.stop()
		return nil, err
	}
	if FuseFD(mnt) < 0 && own == nil {
		// The bdi of a mount on /dev/fd/N is the parent's to raise: stat here would name
		// /dev/fuse's device, not the mount's. serveFUSE raised that of its own mount.
		RaiseReadahead(mnt)
	}
	if shm != nil {
		shm.start(m)
	}
	served = true
	return &Server{Server: srv, Mountpoint: mnt, m: m, own: own, byDir: own != nil}, nil
}

// Unmount stops the shared-memory path, then unmounts and stops the rest (Stop).
func (s *Server) Unmount() error {
	s.StopShm()
	var err error
	if s.byDir {
		var ended bool
		if ended, err = s.unmountDir(0); ended {
			s.Server.Wait() // the kernel ends the connection: go-fuse's readers return
		}
	} else {
		err = s.Server.Unmount()
	}
	if err == nil {
		s.Stop()
	}
	return err
}

// StopShm ends the shared-memory path's connections and waits for their reads, so that the
// cache may go. Idempotent.
func (s *Server) StopShm() { s.m.shm.Load().stop() }

// Stop ends what serves the mount beside the kernel's requests (the shared-memory path, the
// page-cache drops' workers); its owner calls it once the mount is gone (Unmount does), before
// the cache goes. Idempotent.
func (s *Server) Stop() {
	s.StopShm()
	s.m.inval.stop()
	s.ownMu.Lock()
	if s.own != nil {
		s.own.Close()
		s.own = nil
	}
	s.ownMu.Unlock()
}

// Detach unmounts lazily (files open stay readable until closed) a mount that Mount made
// through its directory (as root), through that directory; ok is false for any other, which
// the caller detaches by its path (fusermount3 -u -z without root).
func (s *Server) Detach() (ok bool, err error) {
	if !s.byDir {
		return false, nil
	}
	_, err = s.unmountDir(unix.MNT_DETACH)
	return true, err
}

// unmountDir unmounts a mount made through its directory (byDir), with umount2's flags, once:
// ended says this call unmounted it.
func (s *Server) unmountDir(flags int) (ended bool, err error) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	switch {
	case s.gone:
		return false, nil
	case s.own == nil:
		return false, fmt.Errorf("cannot unmount %s: its directory is closed (Stop)", s.Mountpoint)
	}
	if err := unmountOwn(s.own, s.Mountpoint, flags); err != nil {
		return false, err
	}
	s.gone = true
	return true, nil
}

// RemoveDir removes the mount point, once unmounted, of a mount that Mount made through its
// directory: that directory, in the folder it is in now, and only if it is still there; ok
// is false for any other mount, whose mount point the caller removes by its path.
func (s *Server) RemoveDir() (ok bool, err error) {
	s.ownMu.Lock()
	defer s.ownMu.Unlock()
	if !s.byDir {
		return false, nil
	}
	if s.own == nil {
		return true, fmt.Errorf("cannot remove %s: its directory is closed (Stop)", s.Mountpoint)
	}
	return true, removeDir(s.own)
}

// newMount builds the state of a mount of set, and its info.json.
func newMount(set view.Content, opt Options) (*mount, error) {
	if opt.Epochs == 0 {
		opt.Epochs = DefaultEpochs
	}
	m := &mount{set: set, opt: opt, uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), mtime: time.Now(),
		start: time.Now()}
	if st, err := os.Stat(set.Stamp()); err == nil {
		m.mtime = st.ModTime()
	}
	// Not HTML-escaped: a dtype reads "<f4", not "\u003cf4".
	var info bytes.Buffer
	enc := json.NewEncoder(&info)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m.infoFacts()); err != nil {
		return nil, err
	}
	m.info = info.Bytes()
	m.inval = newInvalidator(invalidators()) // last: Mount stops it if it fails from here
	return m, nil
}

// root returns the root directory node of the mount.
func (m *mount) root() gofs.InodeEmbedder { return &dirNode{m: m, root: true} }

// MaxRequest is the largest FUSE request the kernel sends a mount (its max_pages, which go-fuse
// derives from MaxWrite): a read's reply, and the buffer go-fuse reads each request into.
const MaxRequest = 1 << 20

// MountOptions are the go-fuse options of every blockfs mount, for a file system named fsName
// served as uid and gid. The benchmark's loopback baseline (bench/loopback) mounts with them
// too, so that it measures the same thing.
func MountOptions(fsName string, uid, gid uint32, allowOther, debug bool) *gofs.Options {
	timeout := time.Minute
	negative := time.Second
	return &gofs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &negative,
		UID:             uid,
		GID:             gid,
		MountOptions: fuse.MountOptions{
			FsName:        fsName,
			Name:          Type,
			Options:       []string{"ro", "default_permissions"},
			AllowOther:    allowOther,
			MaxWrite:      MaxRequest,
			MaxBackground: DefaultMaxBackground,
			// Replies are in-memory buffers; splicing them only adds a pipe (and go-fuse logs
			// every 1 MiB reply that does not fit one).
			DisableSplice: true,
			Debug:         debug,
			DirectMount:   os.Geteuid() == 0,
		},
	}
}

// RaiseReadahead lets the kernel read ahead up to 4 MiB on the mount at mnt; go-fuse can only
// lower the default of 128 KiB. Best effort: without it the mount still works, with smaller
// reads. Mount calls it; so do the loopback baseline and bench/fuseuring.
func RaiseReadahead(mnt string) {
	// One descriptor for both questions: the device raised is that of a FUSE mount's root
	// whatever mnt's path names meanwhile.
	fd, err := unix.Open(mnt, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	var sf unix.Statfs_t
	if unix.Fstat(fd, &st) != nil || unix.Fstatfs(fd, &sf) != nil || sf.Type != unix.FUSE_SUPER_MAGIC {
		return
	}
	raiseReadahead(st.Dev)
}

// raiseReadahead raises the readahead of the mount whose device is dev (RaiseReadahead).
func raiseReadahead(dev uint64) {
	major, minor := (dev>>8)&0xfff, (dev&0xff)|((dev>>12)&0xfff00)
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", major, minor)
	if err := os.WriteFile(p, []byte("4096"), 0); err != nil && os.Geteuid() == 0 {
		log.Printf("blockfs: cannot raise kernel readahead (%v); reads stay at 128 KiB", err)
	}
}

// infoFacts returns what .blockfs/info.json says: the set's facts (view.Set.Facts), how many
// epochs a directory lists, and Options.Info.
func (m *mount) infoFacts() map[string]any {
	f := m.set.Facts()
	f["epochs"] = m.opt.Epochs
	for k, v := range m.opt.Info {
		f[k] = v
	}
	return f
}
