package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/userfile"
)

// fuseDevice is /dev/fuse's device number (misc major 10, FUSE_MINOR 229), fixed by the kernel.
var fuseDevice = unix.Mkdev(10, 229)

// devfdHelp is where a message about a /dev/fd/N mount point sends the user.
const devfdHelp = "see docs/USAGE.md, 'Without root, and in containers'"

// checkFuseFD checks that descriptor fd, which the mount point mnt (/dev/fd/N) names, is a
// /dev/fuse open for reading and writing with a mount on it, so that a mistake is one line
// here rather than an error from inside go-fuse.
func checkFuseFD(mnt string, fd int) error {
	if fd <= 2 {
		return fmt.Errorf("mount point %s is standard output or error (descriptor %d); pass the /dev/fuse descriptor as 3 or above", mnt, fd)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("mount point %s: descriptor %d is not open: the process that starts blockfs passes it a /dev/fuse descriptor it has mounted (%s)", mnt, fd, devfdHelp)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != fuseDevice {
		return fmt.Errorf("mount point %s: descriptor %d is not /dev/fuse but %s: pass the /dev/fuse descriptor that was mounted (%s)", mnt, fd, userfile.KindOf(st.Mode), devfdHelp)
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil && fl&unix.O_ACCMODE != unix.O_RDWR {
		return fmt.Errorf("mount point %s: descriptor %d is /dev/fuse open for only reading or writing; open it for both (O_RDWR)", mnt, fd)
	}
	// An unmounted (or unmounted since) connection polls as an error; a mounted one has
	// the kernel's INIT request waiting. Poll reads nothing.
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if _, err := unix.Poll(p, 0); err == nil && p[0].Revents&unix.POLLERR != 0 {
		return fmt.Errorf("mount point %s: descriptor %d is /dev/fuse but nothing is mounted on it (or it was unmounted): the process that passes it calls mount(2) first, with fd=N (its own number for the descriptor) in the data (%s)", mnt, fd, devfdHelp)
	}
	return nil
}

// servedHere returns the devices, as mountinfo names them ("0:38"), of the FUSE connections
// whose /dev/fuse this process holds: a mount on /dev/fd/N is in the mount table while blockfs
// plans, before it serves it; the registry entry names the connection (connection).
// Recent kernels name a descriptor's connection in /proc/self/fdinfo (fuse_connection; 6.18
// does); on an older kernel the map is empty, and the entry has no device.
func servedHere() map[string]bool {
	own := map[string]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return own
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != fuseDevice {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "fuse_connection:"); ok {
				if dev, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					// The kernel's dev_t: major in the top 12 bits, minor in the low 20.
					own[fmt.Sprintf("%d:%d", dev>>20, dev&0xfffff)] = true
				}
			}
		}
	}
	return own
}
