package mount

import (
	"log"
	"os"

	bfs "github.com/blockfs/blockfs/fs"
)

// A mount point /dev/fd/N (bfs.FuseFD) names a FUSE connection that a privileged parent
// opened and mounted before starting blockfs, and passed down as descriptor N: blockfs serves
// it without root or fusermount3 (go-fuse's /dev/fd/N mode, docs/USAGE.md). blockfs never
// learns where it is mounted, so it cannot unmount it: the parent does, and blockfs exits once
// the connection ends, or on a signal, closing the descriptor.

// checkFuseFDOptions refuses, for a mount point /dev/fd/N, the options that a mount made by
// another process cannot honour: --allow-other (the parent's mount(2) data says who may read)
// and --users-lock (ending the mount means unmounting it, which the parent does).
func checkFuseFDOptions(mnt string, opt Options) error {
	if bfs.FuseFD(mnt) < 0 {
		return nil
	}
	if opt.AllowOther {
		return Usagef(flag("allow-other")+": the process that mounted %s chose who may read it (allow_other in its mount(2) data); drop "+flag("allow-other"), mnt)
	}
	if opt.UsersLock != "" {
		return Usagef(flag("users-lock")+": blockfs cannot unmount %s when its last user is gone, the process that mounted it does; drop "+flag("users-lock"), mnt)
	}
	return nil
}

// serveMount serves the mount at mnt until it goes away or a signal stops it, and logs how
// it ended; it reports whether the server stopped (Serve then frees the cache). A /dev/fd/N
// mount is served by serveFD, any other by serve.
func serveMount(srv *bfs.Server, mnt string, sigs <-chan os.Signal, gone <-chan struct{}) bool {
	if bfs.FuseFD(mnt) >= 0 {
		return serveFD(srv, mnt, sigs) // no users lock (checkFuseFDOptions)
	}
	stopped := serve(srv, mnt, sigs, gone)
	log.Printf("blockfs: %s unmounted", mnt)
	return stopped
}

// serveFD is serve for a mount on /dev/fd/N, which blockfs cannot unmount. It waits until the
// parent unmounts it (the kernel then ends the connection), or until SIGINT, SIGTERM or
// SIGQUIT, and then returns at once: the process exits and closes the descriptor, the kernel
// ends the connection (once the parent has closed its copy too), the mount's readers get
// ENOTCONN rather than a hang, and the parent unmounts it. There is nothing to drain:
// waiting would not make the mount go, only keep a process asked to stop.
func serveFD(srv *bfs.Server, mnt string, sigs <-chan os.Signal) bool {
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			log.Printf("blockfs: the mount served on %s was unmounted", mnt)
			return true
		case sig := <-sigs:
			if ignored(sig) {
				log.Printf("blockfs: %v: ignored; still serving %s (the process that mounted it unmounts it)", sig, mnt)
				continue
			}
			log.Printf("blockfs: %v: closing %s and exiting; the process that mounted it unmounts it (its readers get ENOTCONN until then)", sig, mnt)
			return false
		}
	}
}

// FuseFD returns the /dev/fuse descriptor the mount point names (/dev/fd/N), or -1.
func (p *Plan) FuseFD() int { return bfs.FuseFD(p.mnt) }
