// Package layout is blockfs's on-disk format, with no I/O layer of its own: the manifest
// (manifest.go, docs/FORMAT.md), the writer that pack drives (writer*.go: blocks, ids, names,
// compressed frames, the atomic finish), the compressed blocks' codec (frames.go), the index
// of shards served in place (shards.go), and Dataset, an opened dataset as a table of files
// (source.Table) whose shape says what its blocks are: a pack's files (packed.go), ranges of a
// file served in place (flat.go), windows of rows (windows.go), a field of shards in place
// (shards_shape.go) or a node's part of another (sub.go). A Store (source/local, source/s3)
// opens a pack, through whose Blocks opening and VerifyStore read what they check; the
// layers that serve a dataset's files below the cache are source/stack's (stack.Build).
package layout
