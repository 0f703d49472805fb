package fs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Claim is what one blockfs mount that is up planned for data, from the "memory" of its
// .blockfs/info.json.
type Claim struct {
	Mountpoint  string
	Cache       int64  // its daemon's cache
	Resident    int64  // the blocks it keeps resident in the kernel's page cache
	Cgroup      string // the memory cgroup its plan was made in
	OpenData    string // what it serves: the DATA it was mounted from, absolute
	Fingerprint string // the dataset's fingerprint
}

// Claims returns what the blockfs mounts already up in this mount namespace planned for
// data. A new mount plans its budget within what they leave, so two mounts on one machine do
// not each take the same share of it. A mount whose info.json cannot be read (another
// user's, a dead daemon's) or that does not answer within timeout is left out; the reads run
// in parallel, so the wait is at most timeout (a read stuck in a hung daemon stays stuck, in
// its own goroutine, until that daemon answers or goes).
func Claims(timeout time.Duration) []Claim {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mnts []string
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 1 && g[0] == "fuse."+fsType {
			mnts = append(mnts, unescapeMount(f[4]))
		}
	}
	type answer struct {
		c  Claim
		ok bool
	}
	ch := make(chan answer, len(mnts)) // a late answer never blocks its goroutine
	for _, mnt := range mnts {
		go func() {
			b, err := os.ReadFile(filepath.Join(mnt, ".blockfs", "info.json"))
			var info struct {
				OpenData    string `json:"open_data"`
				Fingerprint string `json:"fingerprint"`
				Memory      struct {
					Cache    int64  `json:"cache"`
					Resident int64  `json:"resident"`
					Cgroup   string `json:"cgroup"`
				} `json:"memory"`
			}
			if err != nil || json.Unmarshal(b, &info) != nil {
				ch <- answer{}
				return
			}
			ch <- answer{Claim{Mountpoint: mnt, Cache: info.Memory.Cache, Resident: info.Memory.Resident,
				Cgroup: info.Memory.Cgroup, OpenData: info.OpenData, Fingerprint: info.Fingerprint}, true}
		}()
	}
	var out []Claim
	deadline := time.After(timeout)
	for range mnts {
		select {
		case a := <-ch:
			if a.ok {
				out = append(out, a.c)
			}
		case <-deadline:
			return out
		}
	}
	return out
}

// unescapeMount undoes the octal escapes (\040 for a space) of mountinfo's paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] >= '0' && s[i+1] <= '3' {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
