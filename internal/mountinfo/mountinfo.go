// Package mountinfo parses /proc/PID/mountinfo (proc(5)): the mount table that blockfs reads to
// tell whether a directory is a mount point, to find the other blockfs mounts, and to find
// where the memory cgroup hierarchy is mounted.
package mountinfo

import (
	"os"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo file. Paths are unescaped (\040 is a space).
type Mount struct {
	Dev        string // the filesystem's device, "major:minor" (field 3): a FUSE mount's connection
	Root       string // the path within the mounted filesystem that is its root (field 4)
	Mountpoint string // where it is mounted (field 5)
	FSType     string // the filesystem type after the " - " separator: "ext4", "fuse.blockfs", "cgroup2"
	Super      string // the superblock options: "rw,memory"
}

// Read parses the mountinfo file at path ("/proc/self/mountinfo").
func Read(path string) ([]Mount, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(string(data)), nil
}

// Parse returns the mounts of a mountinfo file's text, skipping malformed lines.
func Parse(data string) []Mount {
	var out []Mount
	for _, line := range strings.Split(data, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 {
			continue
		}
		m := Mount{Dev: f[2], Root: unescape(f[3]), Mountpoint: unescape(f[4]), FSType: g[0]}
		if len(g) >= 3 {
			m.Super = g[2]
		}
		out = append(out, m)
	}
	return out
}

// HasOption reports whether the superblock options include want.
func (m Mount) HasOption(want string) bool {
	for _, o := range strings.Split(m.Super, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// unescape undoes the octal escapes (\040 for a space, \134 for a backslash) of mountinfo's
// paths.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
