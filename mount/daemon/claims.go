package daemon

import (
	"math"

	"github.com/blockfs/blockfs/internal/mountinfo"
	"github.com/blockfs/blockfs/internal/sysmem"
)

// Claim is what one blockfs mount that is up planned for data: the "memory" of its
// .blockfs/info.json, which its daemon also writes to the registry (registry.go).
type Claim struct {
	Cache       int64  `json:"cache"`       // its daemon's cache
	Resident    int64  `json:"resident"`    // the blocks it keeps resident in the kernel's page cache
	Cgroup      string `json:"cgroup"`      // the memory cgroup its plan was made in
	OpenData    string `json:"open_data"`   // what it serves: the DATA it was mounted from, absolute
	Fingerprint string `json:"fingerprint"` // the dataset's fingerprint
}

// Claimed returns what the blockfs mounts already up planned for data out of the memory mem
// describes, for a new mount of openData (absolute) with the given fingerprint to plan its
// budget within what they leave, so that two mounts do not each take the same share.
// Within a cgroup limit only the mounts whose daemons are charged to that cgroup (it or one
// below it) count; without one, every mount. A mount of the same data shares its resident set
// (blocks are chosen by number, so it is the same pages): only its cache counts; the mounts of
// one other dataset count its largest resident set once.
func Claimed(mem sysmem.Memory, openData, fingerprint string) int64 {
	var n int64
	resident := map[[2]string]int64{} // by dataset: the largest resident set of its mounts
	for _, c := range claims() {
		if !mem.Contains(c.Cgroup) || c.Cache < 0 || c.Resident < 0 {
			continue // not this cgroup's, or not a claim any daemon wrote
		}
		n = addClaim(n, c.Cache)
		if k := [2]string{c.OpenData, c.Fingerprint}; k != [2]string{openData, fingerprint} {
			resident[k] = max(resident[k], c.Resident)
		}
	}
	for _, r := range resident {
		n = addClaim(n, r)
	}
	return n
}

// addClaim adds b >= 0 to a >= 0, saturating: claims past the largest int64 claim it all.
func addClaim(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// claims returns what the blockfs mounts up in this mount namespace planned, from the
// registry (registry.go): regular files, so no mount waits for another's daemon.
func claims() []Claim {
	mounts, err := mountinfo.Read("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []Claim
	for _, e := range readRegistry(mounts) {
		out = append(out, e.Claim)
	}
	return out
}
