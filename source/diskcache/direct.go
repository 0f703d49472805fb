package diskcache

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/odirect"
)

// Copies are written with O_DIRECT (odirect.File), from the cache's pages to the disk with no
// copy through the kernel's page cache, which on a machine the store shares is memory
// bandwidth taken from the first epoch (see docs/PERFORMANCE.md); they are read with it when
// Options.Direct says so. Both open relative to the own directory (dir.go), never following a
// symbolic link.

// openCopy opens f's copy for reading, adding O_DIRECT when direct is set and the filesystem
// allows it. O_NONBLOCK: a FIFO in the copy's place opens at once (the caller then refuses it
// as not a regular file) instead of waiting for a writer forever.
func (b *Blocks) openCopy(f file, direct bool) (*odirect.File, error) {
	return odirect.OpenWith(direct, func(extra int) (*os.File, error) {
		return b.openAt(f.rel, f.path, unix.O_RDONLY|unix.O_NONBLOCK|extra, 0)
	})
}

// createTemp creates a new temporary file for f's copy, mode 0600 whatever the umask, with
// O_DIRECT where the filesystem allows it, and returns it and its name ("NAMESPACE/TMP"). The
// name is new (tmpName) and created with O_EXCL|O_NOFOLLOW: nothing in its place is ever
// opened, let alone written.
func (b *Blocks) createTemp(f file) (*odirect.File, string, error) {
	for try := 0; ; try++ {
		tmp := b.ns + "/" + tmpName(filepath.Base(f.rel))
		path := filepath.Join(b.sub, filepath.FromSlash(tmp))
		w, err := odirect.OpenWith(true, func(extra int) (*os.File, error) {
			fd, err := b.openAt(tmp, path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|extra, 0o600)
			if err != nil {
				if extra != 0 && errors.Is(err, unix.EINVAL) {
					// Some filesystems create the file before they refuse O_DIRECT: the
					// fallback's O_EXCL must find the name free.
					_ = b.unlinkAt(tmp)
				}
				return nil, err
			}
			if err := fd.Chmod(0o600); err != nil { // the umask may have taken bits we need
				fd.Close()
				_ = b.unlinkAt(tmp)
				return nil, err
			}
			return fd, nil
		})
		if errors.Is(err, unix.EEXIST) && try < 3 {
			continue // the name is taken (not ours to touch): another name
		}
		return w, tmp, err
	}
}
