// Command fuseuring measures what FUSE over io_uring (Linux 6.14 and later, with the fuse
// module's enable_uring set) would save blockfs's daemon against reading requests from
// /dev/fuse and writing each reply, the only transport go-fuse v2.12.1 has. It is a minimal
// read-only FUSE server written for the measurement alone: it serves files f0 .. fN-1 of SIZE
// bytes each, every read's reply taken from a buffer in memory as blockfs's are from its
// cache. Over /dev/fuse (-transport dev) reader goroutines read a request and write its reply
// with one writev, from the buffer itself as blockfs does, or (-gather) from a copy of it, as
// io_uring needs; -poll reads /dev/fuse non-blocking through Go's poller. Over io_uring
// (-transport uring) each of the kernel's queues (one a CPU) has a ring and a thread of its
// own, on its CPU unless -pin=false; a reply is copied into the ring entry's payload buffer,
// the only place the kernel takes it from, and committed with the fetch of the next request
// in one submission. With -clone each /dev/fuse reader past the first reads a descriptor of its
// own, a clone of the mount's (FUSE_DEV_IOC_CLONE, libfuse's clone_fd): the kernel answers a
// clone's replies from a processing queue of its own, not the one every reader's replies
// share. The bytes are the same every way;
// bench/fuse_uring.sh compares the daemon's CPU seconds per GiB of `dd bs=1M`.
//
//	fuseuring [-transport dev|uring] [-gather] [-poll] [-clone] [-pin=false] [-files N] [-size BYTES]
//	          [-readers N] [-entries N] MOUNTPOINT
//
// It runs as root, prints "ready" once reads can start and, on SIGINT or SIGTERM, its CPU
// seconds, then unmounts.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"
	"unsafe"

	bfs "github.com/blockfs/blockfs/fs"
)

func main() {
	var c config
	transport := flag.String("transport", "dev", "dev (read and write /dev/fuse) or uring (FUSE over io_uring)")
	flag.IntVar(&c.files, "files", 64, "files served, f0 .. fN-1")
	flag.Int64Var(&c.size, "size", 1<<30, "bytes of each file")
	flag.IntVar(&c.readers, "readers", 4, "goroutines reading /dev/fuse (dev)")
	flag.IntVar(&c.entries, "entries", 4, "ring entries (requests in flight) per CPU queue (uring)")
	flag.BoolVar(&c.pin, "pin", true, "each queue's thread on its queue's CPU (uring)")
	flag.BoolVar(&c.gather, "gather", false, "copy each read's reply into a buffer before writing it, as the ring's payload needs (dev)")
	flag.BoolVar(&c.poll, "poll", false, "read /dev/fuse non-blocking through Go's poller, goroutines parked between requests (dev)")
	flag.BoolVar(&c.clone, "clone", false, "each reader past the first on a clone of /dev/fuse of its own (FUSE_DEV_IOC_CLONE) (dev)")
	flag.Parse()
	if flag.NArg() != 1 || (*transport != "dev" && *transport != "uring") {
		fmt.Fprintln(os.Stderr, "usage: fuseuring [-transport dev|uring] [-gather] [-poll] [-clone] [-pin=false] [-files N] [-size BYTES] [-readers N] [-entries N] MOUNTPOINT")
		os.Exit(2)
	}
	c.uring = *transport == "uring"
	if err := run(flag.Arg(0), c); err != nil {
		fmt.Fprintln(os.Stderr, "fuseuring:", err)
		os.Exit(1)
	}
}

func run(mnt string, c config) error {
	fs := newServer(c)
	fd, err := mountFUSE(mnt)
	if err != nil {
		return err
	}
	defer syscall.Unmount(mnt, syscall.MNT_DETACH)
	if c.poll {
		if err := syscall.SetNonblock(fd, true); err != nil {
			return err
		}
	}
	// INIT arrives on /dev/fuse whatever the transport; so do FORGET and INTERRUPT after it.
	inited := make(chan error, 1)
	fatal := make(chan error, c.readers+1)
	for i := 0; i < c.readers; i++ {
		rfd := fd
		if c.clone && i > 0 {
			if rfd, err = cloneFUSE(fd); err != nil {
				return err
			}
			defer syscall.Close(rfd)
		}
		var polled *os.File
		if c.poll {
			// A descriptor of its own for each reader: an os.File reads one caller at a time.
			// NewFile of a non-blocking descriptor reads it through the poller.
			d, err := syscall.Dup(rfd)
			if err != nil {
				return err
			}
			polled = os.NewFile(uintptr(d), "/dev/fuse")
		}
		go func() { fatal <- fs.devLoop(rfd, polled, inited) }()
	}
	select {
	case err := <-inited:
		if err != nil {
			return err
		}
	case err := <-fatal:
		return err
	case <-time.After(10 * time.Second):
		return fmt.Errorf("no FUSE_INIT from the kernel in 10 s")
	}
	if c.uring {
		if err := startQueues(fd, fs, c.entries, fatal); err != nil {
			return err
		}
	}
	bfs.RaiseReadahead(mnt) // 4 MiB, as blockfs's mounts: dd's reads become 1 MiB requests
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case err := <-fatal:
		if err != nil {
			return err
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("cpu %.3f s (user %.3f, sys %.3f), %d reads, %d bytes, %d requests on io_uring\n",
		tv(ru.Utime)+tv(ru.Stime), tv(ru.Utime), tv(ru.Stime), fs.reads.Load(), fs.bytes.Load(), fs.viaRing.Load())
	return nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// mountFUSE opens /dev/fuse and mounts it at mnt, read-only, for every user (root only).
func mountFUSE(mnt string) (int, error) {
	fd, err := syscall.Open("/dev/fuse", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/fuse: %w", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions", fd)
	if err := syscall.Mount("fuseuring", mnt, "fuse.fuseuring", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_RDONLY, opts); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("mount %s: %w (fuseuring runs as root)", mnt, err)
	}
	return fd, nil
}

// fuseDevIocClone is FUSE_DEV_IOC_CLONE, _IOR(229, 0, uint32_t) (include/uapi/linux/fuse.h).
const fuseDevIocClone = 0x8004e500

// cloneFUSE opens /dev/fuse again and attaches the new descriptor to the connection of fd, the
// mount's: requests are read from either, and a reply is written to the descriptor its request
// came from.
func cloneFUSE(fd int) (int, error) {
	c, err := syscall.Open("/dev/fuse", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/fuse for a clone: %w", err)
	}
	master := uint32(fd)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(c), fuseDevIocClone, uintptr(unsafe.Pointer(&master))); e != 0 {
		syscall.Close(c)
		return -1, fmt.Errorf("FUSE_DEV_IOC_CLONE: %w", e)
	}
	return c, nil
}

// patternBytes is the buffer replies are gathered from: 64 MiB of random bytes, larger than
// the CPU's caches, as a cache of records is.
func patternBytes() []byte {
	b := make([]byte, 64<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}
