package mount

import (
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blockfs/blockfs/cache"
	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/mount/daemon"
	"github.com/blockfs/blockfs/mount/report"
	"github.com/blockfs/blockfs/view"
)

// daemonHeapLimit is the soft limit on the daemon's Go heap (the page cache is not in it),
// beside go-fuse's buffers (fuseHeap).
const daemonHeapLimit = 40 << 20

// fuseHeap is the heap go-fuse's request loops hold at once: each of its readers (one a CPU,
// at least 2 and at most 16, as go-fuse counts them) a request buffer and a reply buffer of up
// to bfs.MaxRequest each. The heap's limit makes room for them: under a limit of 40 MiB, 16
// readers' 32 MiB had the collector run without end (half the daemon's CPU on 16 cores, and go-
// fuse's buffer pools emptied by every collection, so each request allocated its buffers anew).
func fuseHeap() int64 {
	readers := min(max(runtime.GOMAXPROCS(0), 2), 16)
	return int64(readers) * 2 * (bfs.MaxRequest + 16<<10)
}

// mount mounts set at the plan's mount point, through the directory its check opened (as
// root; fs/mount_dir.go), which it then closes.
func (p *Plan) mount(set view.Content, fopt bfs.Options) (*bfs.Server, error) {
	fopt.MountDir = p.mntDir
	defer func() {
		if p.mntDir != nil {
			p.mntDir.Close()
			p.mntDir = nil
		}
	}()
	return bfs.Mount(p.mnt, set, fopt)
}

// drainTime is how long a signalled mount waits for readers that still hold files open
// before it exits anyway; the kernel then fails their reads (ENOTCONN) instead of hanging.
const drainTime = 5 * time.Second

// Serve mounts the plan and serves it until the mount goes away (blockfs unmount, fusermount
// -u) or a signal asks for it; it calls ready once the mount is up. It returns an error only
// when the mount could not be made.
func (p *Plan) Serve(ready func()) error {
	// The cache lives outside the Go heap; keep the heap itself (O(blocks) epoch tables, FUSE
	// buffers) tight so RSS stays within the cache budget plus a small constant.
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(daemonHeapLimit + fuseHeap())
	sv, err := p.build()
	if err != nil {
		return err
	}
	defer sv.close()
	c, set := sv.cache, sv.tree
	// The order state lives on the heap, in bytes the Set took out of the cache's budget, and
	// so do a compressed pack's decode buffers (the plan's Decode, beside the budget): a limit
	// below them would have the collector run without end.
	debug.SetMemoryLimit(daemonHeapLimit + fuseHeap() + set.OrderBytes() + p.mem.Decode)
	sigs := catchSignals()
	defer signal.Stop(sigs)
	stats := p.statsOf(sv)
	fopt := bfs.Options{
		Epochs: p.opt.Epochs, Readahead: p.readahead, AllowOther: p.opt.AllowOther, Debug: p.opt.Debug, NoShm: p.opt.NoShm,
		MaxBackground: p.opt.MaxBackground, FuseReaders: p.opt.FuseReaders, Stats: stats.JSON, Info: p.info(c, set),
	}
	fopt.OnFailure = p.onFailure()
	var met *report.Metrics
	var ml net.Listener
	if p.opt.Metrics != "" {
		if ml, err = report.Listen(p.opt.Metrics); err != nil {
			c.Close()
			return err
		}
		defer ml.Close()
		var rs int64
		if _, one := p.shape().(onePlan); one {
			rs = p.ds.RecordSize()
		}
		met = report.NewMetrics(rs)
		fopt.OnRead = met.OnRead
	}
	srv, err := p.mount(set, fopt)
	if err != nil {
		c.Close()
		return err
	}
	facts := infoFacts(set, fopt.Info)
	defer daemon.Register(p.mnt, facts)()
	if met != nil {
		met.Snapshot = func() report.Stats { return stats.Snapshot(srv.Counters()) }
		go met.Serve(ml)
		log.Printf("blockfs: metrics at http://%s/metrics", ml.Addr())
	}
	if p.opt.CPUProfile != "" {
		stop, err := startCPUProfile(p.opt.CPUProfile)
		if err != nil {
			srv.Unmount()
			c.Close()
			return err
		}
		defer stop()
	}
	stopGrowing := p.growCache(c, set.OrderBytes(), srv.Places, facts)
	defer stopGrowing()
	p.shape().logServing(p)
	log.Printf("blockfs: memory budget %s (%s); cache %s (%s); direct I/O %v (%s)", ibytes(p.mem.Budget), p.mem.BudgetReason,
		ibytes(c.Capacity()), p.mem.CacheReason, p.mem.Direct, p.mem.Reason)
	ready()
	if p.serveUntilEnd(srv, sigs) {
		// Only once the server and the shared-memory path have stopped may the cache's
		// memory go.
		srv.Stop()
		stopGrowing()
		c.Close()
	}
	return nil
}

// onFailure is fs.Options.OnFailure for p: the first read that finds a local shard's values
// out of step with the automatic index (layout.ErrIndexOutOfStep) marks that index stale
// (markStale), in the directory the mount opened (a later mount may have made the index
// again since: that one is not marked); nil for other mounts.
func (p *Plan) onFailure() func(err error, reason string) {
	if p.autoIndex == "" {
		return nil
	}
	dir, err := os.Open(p.autoIndex)
	if err != nil {
		log.Printf("blockfs: the shards' index %s: %v (a shard edited in place will not be found by the next mount)", p.autoIndex, err)
		return nil
	}
	var marked atomic.Bool
	return func(err error, reason string) {
		if !errors.Is(err, layout.ErrIndexOutOfStep) || marked.Swap(true) {
			return
		}
		if err := markStale(dir, reason); err != nil {
			log.Printf("blockfs: cannot mark the index in %s stale (%v): remove it, and the next mount indexes the shards again", p.autoIndex, err)
		}
	}
}

// info returns the facts of the mount for .blockfs/info.json beyond the dataset's.
func (p *Plan) info(c *cache.Cache, set view.Content) map[string]any {
	m := map[string]any{
		"cache_size": c.Capacity() + set.OrderBytes(), "order_state_budget": set.OrderBytes(), "cache_size_reason": p.mem.CacheReason,
		"direct_io": p.mem.Direct, "direct_io_reason": p.mem.Reason, "memory": p.mem.Facts(),
		"readahead": p.readahead, "verify": p.opt.Verify, "open_data": p.loc.Abs, "order": p.order,
	}
	if p.opt.Log != "" {
		m["log"] = p.opt.Log // the daemon's log lines: --log, or a --daemon mount's own (daemon.DaemonLog)
	}
	if p.disk != nil {
		m["disk_cache"], m["disk_cache_size"] = p.disk.Dir, p.disk.Size
	}
	if p.mix != nil {
		delete(m, "order") // each source's: sources[].order
	}
	if p.mix == nil {
		m["open_flags"] = p.opt.Given.OpenArgs()
	}
	m["options"] = p.opt.Given.Keyed()
	return m
}

// catchSignals catches, from before the mount appears, every signal whose default would kill
// the daemon, so none leaves a dead mount behind (one that arrives while go-fuse is still
// mounting is served once the mount is up): SIGINT, SIGTERM and SIGQUIT unmount; SIGHUP,
// SIGUSR1 and SIGUSR2 are logged and ignored; SIGPIPE (a closed log pipe) is ignored, so a
// log write fails instead.
func catchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	signal.Ignore(syscall.SIGPIPE)
	return sigs
}

// serve waits until the mount goes away, a signal asks for it or its last user is gone (the
// watcher has then detached it). On SIGINT/SIGTERM/SIGQUIT it unmounts; if readers keep files
// open it detaches lazily. Either way it then waits at most drainTime for open files to close.
// It reports whether the server stopped (false: exiting with it running).
func serve(srv *bfs.Server, mnt string, sigs <-chan os.Signal, gone <-chan struct{}) bool {
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	for waiting := true; waiting; {
		select {
		case <-done:
			return true
		case <-gone:
			return drain(done, sigs)
		case sig := <-sigs:
			if ignored(sig) {
				// A closed terminal, a log rotation, a stray signal: the mount stays.
				log.Printf("blockfs: %v: ignored; %s stays mounted (stop it with blockfs unmount %s)", sig, mnt, mnt)
				continue
			}
			log.Printf("blockfs: %v: unmounting %s", sig, mnt)
			waiting = false
		}
	}
	if err := srv.Unmount(); err != nil {
		log.Printf("blockfs: unmount: %s; detaching lazily", strings.Join(strings.Fields(err.Error()), " "))
		if err := mountEnd(srv, mnt).Detach(); err != nil {
			log.Printf("blockfs: %v", err)
		}
	}
	return drain(done, sigs)
}

// serveUntilEnd serves srv until its mount ends (serveMount), ended also by the users lock's
// watch where the plan has one. The watch has stopped when it returns, before the caller stops
// srv: it may still be removing the mount point through srv's directory.
func (p *Plan) serveUntilEnd(srv *bfs.Server, sigs <-chan os.Signal) bool {
	if p.opt.UsersLock == "" {
		return serveMount(srv, p.mnt, sigs, nil) // gone nil: never ready
	}
	w := daemon.WatchUsers(p.opt.UsersLock, p.mnt, mountEnd(srv, p.mnt), p.opt.RemoveMountpoint)
	defer w.Stop()
	return serveMount(srv, p.mnt, sigs, w.Gone())
}

// mountEnd ends srv's mount at mnt, for the users watch and for serve: through the directory
// it was mounted on where the Server made it so (as root), else by the path.
func mountEnd(srv *bfs.Server, mnt string) daemon.MountEnd {
	return daemon.MountEnd{
		Detach: func() error {
			if ok, err := srv.Detach(); ok {
				return err
			}
			return daemon.Unmount(mnt, true)
		},
		Remove: func() error {
			if ok, err := srv.RemoveDir(); ok {
				return err
			}
			return os.Remove(mnt)
		},
	}
}

// drain waits for the server to stop, at most drainTime or until a second signal.
func drain(done <-chan struct{}, sigs <-chan os.Signal) bool {
	deadline := time.After(drainTime)
	for {
		select {
		case <-done:
			return true
		case <-deadline:
			log.Printf("blockfs: readers still hold files open after %v; exiting (their reads now fail)", drainTime)
			return false
		case sig := <-sigs:
			if ignored(sig) {
				log.Printf("blockfs: %v during unmount: ignored", sig)
				continue
			}
			log.Printf("blockfs: %v during unmount: exiting now", sig)
			return false
		}
	}
}

// ignored reports whether a signal is logged and ignored rather than a reason to stop: a
// closed terminal, a log rotation, a stray user signal.
func ignored(sig os.Signal) bool {
	return sig == syscall.SIGHUP || sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2
}

// startCPUProfile profiles the daemon into path, and where its goroutines waited on locks
// into path.mutex, until the returned function is called (the hidden --cpuprofile flag, for
// docs/PERFORMANCE.md's profiles). Each file is made new, never through a symbolic link.
func startCPUProfile(path string) (func(), error) {
	f, err := createProfile(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", optname.Flag("cpuprofile"), err)
	}
	runtime.SetMutexProfileFraction(mutexFraction)
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		m, err := createProfile(path + ".mutex")
		if err == nil {
			err = pprof.Lookup("mutex").WriteTo(m, 0)
			m.Close()
		}
		if err != nil {
			log.Printf("blockfs: %v", err)
		}
	}, nil
}

// mutexFraction samples one lock contention in this many: cheap enough for a benchmark's run.
const mutexFraction = 10

// createProfile opens path anew for a profile (userfile.Create: no symbolic link, FIFO or
// device there).
func createProfile(path string) (*os.File, error) {
	f, err := userfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", optname.Flag("cpuprofile"), err)
	}
	return f, nil
}

// infoFacts returns what the mount's .blockfs/info.json says (fs's infoFacts): the set's facts
// and the mount's own.
func infoFacts(set view.Content, extra map[string]any) map[string]any {
	f := set.Facts()
	for k, v := range extra {
		f[k] = v
	}
	return f
}
