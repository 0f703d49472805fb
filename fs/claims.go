package fs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Claimed returns the memory that the blockfs mounts already up in this mount namespace have
// planned for data, and how many answered: each one's cache plus its resident set, from the
// "memory" of its .blockfs/info.json. A new mount plans its budget within what they leave, so
// two mounts on one machine do not each take the same share of it. A mount whose info.json
// cannot be read (another user's, a dead daemon's) or that does not answer within timeout is
// left out; the reads run in parallel, so the wait is at most timeout.
func Claimed(timeout time.Duration) (int64, int) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, 0
	}
	type answer struct {
		bytes int64
		ok    bool
	}
	var mnts []string
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 1 && g[0] == "fuse."+fsType {
			mnts = append(mnts, unescapeMount(f[4]))
		}
	}
	ch := make(chan answer, len(mnts)) // a late answer never blocks its goroutine
	for _, mnt := range mnts {
		go func() {
			b, err := os.ReadFile(filepath.Join(mnt, ".blockfs", "info.json"))
			var info struct {
				Memory struct {
					Cache    int64 `json:"cache"`
					Resident int64 `json:"resident"`
				} `json:"memory"`
			}
			if err != nil || json.Unmarshal(b, &info) != nil {
				ch <- answer{}
				return
			}
			ch <- answer{info.Memory.Cache + info.Memory.Resident, true}
		}()
	}
	var total int64
	answered := 0
	deadline := time.After(timeout)
	for range mnts {
		select {
		case a := <-ch:
			if a.ok {
				total += a.bytes
				answered++
			}
		case <-deadline:
			return total, answered
		}
	}
	return total, answered
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
