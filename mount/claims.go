package mount

import (
	"github.com/blockfs/blockfs/internal/sysmem"
	"github.com/blockfs/blockfs/mount/daemon"
)

// claimed is daemon.Claimed for p's plan; a daemon's (RecordClaim) takes the planning lock first.
func (p *Plan) claimed(mem sysmem.Memory, openData, fingerprint string) int64 {
	if p.opt.RecordClaim {
		daemon.LockPlans()
	}
	return daemon.Claimed(mem, openData, fingerprint)
}

// recordClaim writes what p planned to the registry as this daemon's entry, before it mounts:
// an entry that names no mount counts while its daemon lives, so the mounts planned after this
// one leave its memory to it. Serving rewrites the entry once mounted (daemon.Register).
func (p *Plan) recordClaim() {
	fp := ""
	if p.ds != nil { // one dataset, or a node's parts of one (a mixture's and fields' plans have none)
		fp = p.ds.Manifest.Fingerprint()
	}
	daemon.WriteClaim(map[string]any{"open_data": p.loc.Abs, "fingerprint": fp, "memory": p.mem.Facts()}, "")
}
