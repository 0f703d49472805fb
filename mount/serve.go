package mount

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/blockfs/blockfs/cache"
	bfs "github.com/blockfs/blockfs/fs"
	"github.com/blockfs/blockfs/source"
	"github.com/blockfs/blockfs/view"
)

// daemonHeapLimit is the soft limit on the daemon's Go heap (the page cache is not in it).
const daemonHeapLimit = 40 << 20

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
	debug.SetMemoryLimit(daemonHeapLimit)
	sv, err := p.build()
	if err != nil {
		return err
	}
	defer sv.close()
	c, set := sv.cache, sv.tree
	// The order state lives on the heap, in bytes the Set took out of the cache's budget.
	debug.SetMemoryLimit(daemonHeapLimit + set.OrderBytes())
	sigs := catchSignals()
	defer signal.Stop(sigs)
	fopt := bfs.Options{
		Epochs: p.opt.Epochs, Readahead: p.readahead, AllowOther: p.opt.AllowOther, Debug: p.opt.Debug,
		DiskCache: sv.diskStats(), Store: sv.storeStats(), Sources: p.sourceStats(sv), Info: p.info(c, set),
	}
	var met *metrics
	var ml net.Listener
	if p.opt.Metrics != "" {
		if ml, err = listenMetrics(p.opt.Metrics); err != nil {
			c.Close()
			return err
		}
		defer ml.Close()
		var rs int64
		if p.ds != nil && p.mix == nil && p.fields == nil && p.nodes == nil {
			rs = p.ds.RecordSize()
		}
		met = newMetrics(rs)
		fopt.OnRead = met.onRead
	}
	srv, err := bfs.Mount(p.mnt, set, fopt)
	if err != nil {
		c.Close()
		return err
	}
	defer register(p.mnt, infoFacts(set, fopt.Info))()
	if met != nil {
		met.snapshot = srv.Stats
		go met.serve(ml)
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
	p.logServing()
	log.Printf("blockfs: memory budget %s (%s); cache %s (%s); direct I/O %v (%s)", ibytes(p.mem.Budget), p.mem.BudgetReason,
		ibytes(c.Capacity()), p.mem.CacheReason, p.mem.Direct, p.mem.Reason)
	ready()
	var gone <-chan struct{} // nil (never ready) without a users lock
	if p.opt.UsersLock != "" {
		w := watchUsers(p.opt.UsersLock, p.mnt, p.opt.RemoveMountpoint)
		defer w.stop()
		gone = w.gone
	}
	if serveMount(srv, p.mnt, sigs, gone) {
		// Only once the server has stopped may the cache's memory go.
		c.Close()
	}
	return nil
}

// info returns the facts of the mount for .blockfs/info.json beyond the dataset's.
func (p *Plan) info(c *cache.Cache, set view.Served) map[string]any {
	m := map[string]any{
		"cache_size": c.Capacity() + set.OrderBytes(), "order_state_budget": set.OrderBytes(), "cache_size_reason": p.mem.CacheReason,
		"direct_io": p.mem.Direct, "direct_io_reason": p.mem.Reason, "memory": p.mem.Facts(),
		"readahead": p.readahead, "verify": p.opt.Verify, "open_data": p.loc.Abs, "order": p.order,
	}
	if p.disk != nil {
		m["disk_cache"], m["disk_cache_size"] = p.disk.Dir, p.disk.Size
	}
	if p.mix != nil {
		delete(m, "order") // each source's: sources[].order
	}
	for k, v := range p.opt.Info {
		m[k] = v
	}
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
		if err := Unmount(mnt, true); err != nil {
			log.Printf("blockfs: %v", err)
		}
	}
	return drain(done, sigs)
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

// startCPUProfile profiles the daemon into path until the returned function is called (the
// hidden --cpuprofile flag, for docs/PERFORMANCE.md's profiles).
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// logServing logs what the mount serves and its order.
func (p *Plan) logServing() {
	o := p.opt.Order
	if p.nodes != nil {
		p.nodes.logServing(p)
		return
	}
	if p.fields != nil {
		log.Printf("blockfs: serving %s (%d records with fields %v) at %s; shuffle %s, mix %d (%s), seed %d",
			p.fields.dir, p.fields.man.Records, p.fields.names(), p.mnt, o.Mode, max(1, o.Mix), p.order.Why, o.Seed)
		return
	}
	if p.mix == nil {
		log.Printf("blockfs: serving %s (%d records, %s, %d blocks) at %s; shuffle %s, mix %d (%s), seed %d",
			p.ds.Dir, p.ds.Records(), ibytes(int64(p.ds.Bytes())), p.ds.Blocks(), p.mnt, o.Mode, max(1, o.Mix), p.order.Why, o.Seed)
		return
	}
	me, _ := p.mix.order.Epoch(0)
	log.Printf("blockfs: serving the mixture %s (%d records in epoch 0 from %d sources) at %s; seed %d", p.mix.spec.File, me.Len(), len(p.mix.srcs), p.mnt, o.Seed)
	for i, sub := range p.mix.srcs {
		so := sub.opt.Order
		log.Printf("blockfs: source %d (%s): %s, %d records, %d an epoch (%s %s); shuffle %s, mix %d (%s), seed %d", i, p.mix.spec.Sources[i].Name,
			sub.ds.Dir, sub.ds.Records(), me.Count(i), p.mix.spec.Sources[i].Rule.Kind, p.mix.spec.Sources[i].Rule.Text, so.Mode, max(1, so.Mix), sub.order.Why, so.Seed)
	}
}

// served is what Serve mounts: the tree, its cache, and the stacks of sources below it.
type served struct {
	tree   view.Served
	cache  *cache.Cache
	stacks []*stack
	mux    *source.Mux // a mixture's sources under the cache
	node   bool        // a node-aware mount: its parts under mux, one dataset's stack
}

// build opens the sources, the cache and the tree: one dataset's epochs, a mixture's or a
// dataset with fields' over one cache whose namespaces are its sources (source.Mux), or a
// node's parts (nodesPlan.build).
func (p *Plan) build() (*served, error) {
	if p.nodes == nil {
		return p.buildSources()
	}
	st, err := p.openSources()
	if err != nil {
		return nil, err
	}
	return p.nodes.build(p, st)
}

// buildSources is build for a plan of one or several sources, each with its stack.
func (p *Plan) buildSources() (*served, error) {
	sv := &served{}
	plans := []*Plan{p}
	switch {
	case p.mix != nil:
		plans = p.mix.srcs
	case p.fields != nil:
		plans = p.fields.srcs
	}
	var parts []source.Blocks
	for _, sub := range plans {
		st, err := sub.openSources()
		if err != nil {
			sv.close()
			return nil, err
		}
		sv.stacks = append(sv.stacks, st)
		parts = append(parts, st.src)
	}
	src := parts[0]
	if len(plans) > 1 || p.ds == nil {
		sv.mux = source.NewMux(parts)
		src = sv.mux
	}
	c, err := cache.New(src, p.cacheOpt)
	if err != nil {
		sv.close()
		return nil, err
	}
	sv.cache = c
	if p.mix == nil && p.fields == nil {
		if sv.tree, err = view.NewSet(p.ds, c, p.opt.Order); err != nil {
			c.Close()
			sv.close()
			return nil, err
		}
		return sv, nil
	}
	var sets []*view.Set
	for i, sub := range plans {
		share := sub.mem.CacheSize
		if sub.byIndex {
			share = 0 // read in the anchor's order: no windows of its own to keep
		}
		set, err := view.NewSetWithin(sub.ds, c.Namespace(i), sub.opt.Order, share)
		if err != nil {
			c.Close()
			sv.close()
			if p.fields != nil {
				return nil, fmt.Errorf("field %q: %w", p.fields.man.Fields[i].Name, err)
			}
			return nil, sourceErr(p.mix.spec, i, err)
		}
		sets = append(sets, set)
	}
	if p.fields != nil {
		fl, err := view.NewFields(sets, p.fields.names(), p.fields.own(), c, p.fields.dir, p.fields.facts())
		if err != nil {
			c.Close()
			sv.close()
			return nil, err
		}
		for _, sub := range plans {
			fl.Ahead = append(fl.Ahead, sub.readahead)
		}
		sv.tree = fl
		return sv, nil
	}
	if sv.tree, err = view.NewMixture(sets, p.mix.order, c, p.mix.spec.File, p.mix.facts(p.opt.Order.Seed)); err != nil {
		c.Close()
		sv.close()
		return nil, mixtureErr(p.mix.spec, err)
	}
	return sv, nil
}

// close closes the stacks of sources.
func (s *served) close() {
	for _, st := range s.stacks {
		st.close()
	}
}

// diskStats returns what stats.json shows of the disk cache, or nil without one; for a
// mixture, a list by source index (null for a source without one).
// storeStats returns what stats.json shows of the object stores: one's counters, or a list
// by source of a mixture's (null for a local source); nil when no source is in a store.
func (s *served) storeStats() func() any {
	any1 := false
	for _, st := range s.stacks {
		any1 = any1 || st.store != nil
	}
	if !any1 {
		return nil
	}
	if s.mux == nil || s.node {
		return func() any { return s.stacks[0].store() }
	}
	return func() any {
		out := make([]any, len(s.stacks))
		for i, st := range s.stacks {
			if st.store != nil {
				out[i] = st.store()
			}
		}
		return out
	}
}

func (s *served) diskStats() func() any {
	if s.mux == nil || s.node {
		return s.stacks[0].diskStats()
	}
	fns := make([]func() any, len(s.stacks))
	any1 := false
	for i, st := range s.stacks {
		fns[i] = st.diskStats()
		any1 = any1 || fns[i] != nil
	}
	if !any1 {
		return nil
	}
	return func() any {
		out := make([]any, len(fns))
		for i, f := range fns {
			if f != nil {
				out[i] = f()
			}
		}
		return out
	}
}

// sourceStats returns what stats.json says of a mixture's sources, or of a dataset's fields:
// the reads and bytes each gave the cache (from disk, the disk cache or the store); nil for
// one dataset.
func (p *Plan) sourceStats(sv *served) func() any {
	if sv.mux == nil || p.nodes != nil {
		return nil
	}
	var names []string
	switch {
	case p.mix != nil:
		for _, src := range p.mix.spec.Sources {
			names = append(names, src.Name)
		}
	case p.fields != nil:
		names = p.fields.names()
	}
	type sourceStats struct {
		Index int    `json:"index"`
		Name  string `json:"name"`
		Reads uint64 `json:"reads"`
		Bytes uint64 `json:"bytes_read"`
	}
	return func() any {
		out := make([]sourceStats, len(names))
		for i := range out {
			r, b := sv.mux.Read(i)
			out[i] = sourceStats{Index: i, Name: names[i], Reads: r, Bytes: b}
		}
		return out
	}
}
