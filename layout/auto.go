package layout

import "github.com/blockfs/blockfs/internal/optname"

// Data served in place has no block files: its blocks are logical ranges, chosen here when
// --block-size is not given. They are small enough that the order can mix many of them (an
// epoch window of mount's automatic --mix spans hundreds), and large enough that each is one
// large disk read: 1 MiB, the page of the cache and where random block reads level off
// (FORMAT.md). Larger only to keep a huge file within 2^18 blocks (O(blocks) of order state) or
// to hold a few units.

// AutoBlockMin is the smallest automatic logical block.
const AutoBlockMin = 1 << 20

// autoMaxBlocks bounds the blocks of an automatic choice.
const autoMaxBlocks = 1 << 18

// AutoBlockSize returns the logical block size for size bytes of data whose blocks must hold
// at least unit bytes (a record, or a few windows of rows): the largest of AutoBlockMin, unit
// and size / 2^18, rounded up to 4 KiB. It depends on nothing but its arguments, so every
// mount of the same data with the same flags cuts the same blocks.
func AutoBlockSize(size, unit int64) int64 {
	bs := max(AutoBlockMin, unit, (size+autoMaxBlocks-1)/autoMaxBlocks)
	return (bs + 4095) &^ 4095
}

// The per-block state budget. A mount keeps about 40 bytes for each block whatever its size
// (where its records start, its count, its place in the order of the epochs it keeps), so a
// block that holds a few bytes costs as much as a large one: MaxBlocks of them take 20 MiB, a
// third of what a mount may take beside its cache. Logical blocks (data in place, windows)
// are cut within it, and at least MinBlockSize each when the user gives --block-size: smaller
// blocks only add state and disk reads, and the cache still loads a block into one page.
const (
	MaxBlocks    = 1 << 19
	MinBlockSize = 4 << 10
)

// tooManyBlocks refuses windows whose blocks of blockSize would be more than MaxBlocks.
func tooManyBlocks(path string, blockSize int64) error {
	return errorf(ErrFormat, path, -1, "windows in blocks of %d bytes make more than %d blocks; blockfs keeps about 40 bytes of state for each block and allows at most %d: raise %s (or leave it out: auto)",
		blockSize, MaxBlocks, MaxBlocks, optname.Flag("block-size"))
}
