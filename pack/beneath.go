package pack

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/userfile"
)

// openInputFile opens an input file named by path (a shard, a Parquet or Arrow file, found by a
// folder's listing or given): without waiting (a FIFO put in its place by anyone who can
// write the folder hung pack) and only a regular file (userfile.Open). A symlink the user
// made to an input is followed, as a path given is.
func openInputFile(path string) (*os.File, error) {
	f, _, err := userfile.Open(path, -1)
	return f, err
}

// openBeneath opens rel, a '/'-separated path that the listing of the folder dir found in it,
// for reading without waiting on a FIFO (O_NONBLOCK), following no symlink in any of its
// components and never leaving dir (userfile.OpenBeneath): a symlink put in the place of a
// folder on the path since the listing (by anyone who can write in the folder) would
// otherwise lead the open to any file the packing user can read. name is the file's name for
// the *os.File. The errors: ELOOP when the file itself is a symlink; a
// *userfile.FolderChangedError when a folder on its path is no longer one; else the open's.
func openBeneath(dir *os.File, rel, name string) (*os.File, error) {
	fd, err := userfile.OpenBeneath(int(dir.Fd()), rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
