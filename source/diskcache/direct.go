package diskcache

import (
	"os"

	"github.com/blockfs/blockfs/internal/odirect"
)

// Copies are written with O_DIRECT (odirect.File), from the cache's pages to the disk with no
// copy through the kernel's page cache, which on a machine the store shares is memory
// bandwidth taken from the first epoch (see docs/PERFORMANCE.md); they are read with it when
// Options.Direct says so.

// openFile opens path with flag (and mode 0644 if it creates it), adding O_DIRECT when
// direct is set and the filesystem allows it.
func openFile(path string, flag int, direct bool) (*odirect.File, error) {
	return odirect.OpenFile(path, flag, direct)
}

// createTemp creates (truncating) the file a copy is written to, with O_DIRECT where the
// filesystem allows it.
func createTemp(path string) (*odirect.File, error) {
	return odirect.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, true)
}
