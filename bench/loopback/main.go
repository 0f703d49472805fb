// Command loopback is the benchmark's baseline daemon: it serves the given files concatenated
// as MOUNTPOINT/data through FUSE, with blockfs's mount options, until SIGINT/SIGTERM.
//
//	loopback MOUNTPOINT FILE...
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/blockfs/blockfs/fs"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: loopback MOUNTPOINT FILE...")
		os.Exit(2)
	}
	srv, err := fs.MountConcat(os.Args[1], os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopback:", err)
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		if err := srv.Unmount(); err != nil {
			_ = syscall.Unmount(srv.Mountpoint, syscall.MNT_DETACH)
		}
	}()
	srv.Wait()
}
