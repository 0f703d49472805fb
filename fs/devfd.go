package fs

import (
	"path"
	"strconv"
)

// FuseFD returns N when mountpoint is go-fuse's magic form /dev/fd/N, and -1 otherwise. Such a
// mount point is not a directory: a privileged parent opened /dev/fuse, called mount(2) on a
// directory blockfs never learns, and passed the descriptor down as N; blockfs then serves the
// FUSE connection on it without root or fusermount3, and cannot unmount it (the parent does).
// The rule is go-fuse's own (fuse.parseFuseFd), so that blockfs and go-fuse agree on which
// mount points are descriptors: exactly "/dev/fd/" and a number above 0.
func FuseFD(mountpoint string) int {
	dir, file := path.Split(mountpoint)
	if dir != "/dev/fd/" {
		return -1
	}
	fd, err := strconv.Atoi(file)
	if err != nil || fd <= 0 {
		return -1
	}
	return fd
}
