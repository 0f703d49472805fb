package fs

import gofs "github.com/hanwen/go-fuse/v2/fs"

// The interfaces each node implements; a missing method is a compile error here.
var (
	_ = (gofs.NodeGetattrer)((*dirNode)(nil))
	_ = (gofs.NodeSetattrer)((*dirNode)(nil))
	_ = (gofs.NodeLookuper)((*dirNode)(nil))
	_ = (gofs.NodeReaddirer)((*dirNode)(nil))
	_ = (gofs.NodeGetattrer)((*fileNode)(nil))
	_ = (gofs.NodeSetattrer)((*fileNode)(nil))
	_ = (gofs.NodeOpener)((*fileNode)(nil))
	_ = (gofs.NodeReader)((*fileNode)(nil))
	_ = (gofs.NodeReleaser)((*fileNode)(nil))
	_ = (gofs.NodeGetattrer)((*metaNode)(nil))
	_ = (gofs.NodeLookuper)((*metaNode)(nil))
	_ = (gofs.NodeReaddirer)((*metaNode)(nil))
	_ = (gofs.NodeGetattrer)((*statsNode)(nil))
	_ = (gofs.NodeSetattrer)((*statsNode)(nil))
	_ = (gofs.NodeOpener)((*statsNode)(nil))
	_ = (gofs.NodeReader)((*statsNode)(nil))
	_ = (gofs.DirStream)((*epochStream)(nil))
)
