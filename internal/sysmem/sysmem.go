// Package sysmem reads the memory a process really has: the machine's RAM and what of it is
// available (/proc/meminfo), and the limit of the memory cgroup the process runs in (v1
// memory.limit_in_bytes, v2 memory.max and memory.high, the tightest of its own cgroup and its
// ancestors), which in a container, a Kubernetes pod or a Slurm job is far below the RAM.
//
// Everything is read from files under a root directory ("/" in production), so tests build a
// fake /proc and /sys/fs/cgroup in a temporary directory. Nothing here writes.
package sysmem

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/blockfs/blockfs/internal/mountinfo"
)

// Memory is what a process has, in bytes. Zero fields are unknown (or, for Limit, absent).
type Memory struct {
	RAM       int64 // MemTotal
	Available int64 // MemAvailable: free memory plus what the kernel can reclaim without swap

	// The memory cgroup whose limit is the tightest of the process's cgroup and its ancestors
	// (the process's own cgroup when none has a limit).
	Cgroup      string // its path in the hierarchy ("/kubepods/pod1/c1"); "" without a memory cgroup
	Version     int    // 1 or 2; 0 without a memory cgroup
	Limit       int64  // its limit; 0: none
	Usage       int64  // its usage (page cache included)
	Reclaimable int64  // its file pages (active_file + inactive_file): page cache it can drop
}

// unlimited is the smallest value treated as "no limit": v1 reports a limit near 2^63 when
// none is set.
const unlimited = 1 << 60

// limited reports whether the cgroup's limit, not the RAM, bounds the memory.
func (m Memory) limited() bool { return m.Limit > 0 && (m.RAM <= 0 || m.Limit < m.RAM) }

// Total returns the memory the process may use: the least of the RAM and the cgroup's limit
// (0 if neither is known).
func (m Memory) Total() int64 {
	if m.limited() {
		return m.Limit
	}
	return m.RAM
}

// Free returns what the process can still take without pushing anything but page cache out:
// the machine's available memory, and within a cgroup limit, the limit less the usage plus
// the cgroup's reclaimable page cache; the lesser of the two (0 if unknown).
func (m Memory) Free() int64 {
	free := m.Available
	if m.Limit > 0 {
		cg := max(0, m.Limit-m.Usage+m.Reclaimable)
		cg = min(cg, m.Limit)
		if free <= 0 || cg < free {
			free = cg
		}
	}
	return free
}

// Contains reports whether memory charged to cgroup other counts against Total: within a
// cgroup limit, other is that cgroup or one below it; without one, every cgroup does (they
// all share the RAM).
func (m Memory) Contains(other string) bool {
	if !m.limited() || m.Cgroup == "" || m.Cgroup == "/" {
		return true
	}
	return other == m.Cgroup || strings.HasPrefix(other, m.Cgroup+"/")
}

// Source says where Total comes from, for info.json and the mount's log: "RAM", or "cgroup
// v2 limit of /PATH".
func (m Memory) Source() string {
	if m.limited() {
		return fmt.Sprintf("cgroup v%d limit of %s", m.Version, m.Cgroup)
	}
	if m.RAM <= 0 {
		return "unknown"
	}
	return "RAM"
}

// Read returns the memory of the calling process.
func Read() Memory { return ReadAt("/", "self") }

// ReadAt returns the memory of process pid ("self" or a number) as the files under root
// describe it.
func ReadAt(root, pid string) Memory {
	var m Memory
	m.RAM, m.Available = meminfo(filepath.Join(root, "proc", "meminfo"))
	cg, ok := findCgroup(root, pid)
	if !ok {
		return m
	}
	m.Version, m.Cgroup = cg.version, cg.path
	// Walk from the process's cgroup up to the root of the mounted hierarchy, keeping the
	// tightest limit: a container's limit is often set on a parent (the pod), not the leaf.
	best := ""
	for p := cg.path; ; p = path.Dir(p) {
		dir := cg.dir(p)
		if lim := cg.limit(dir); lim > 0 && (m.Limit == 0 || lim < m.Limit) {
			m.Limit, best = lim, p
		}
		if p == cg.root || p == "/" || p == "." {
			break
		}
	}
	if best != "" {
		m.Cgroup = best
	}
	dir := cg.dir(m.Cgroup)
	m.Usage = cg.usage(dir)
	m.Reclaimable = cg.fileCache(dir)
	return m
}

// meminfo returns MemTotal and MemAvailable in bytes.
func meminfo(file string) (total, avail int64) {
	f, err := os.Open(file)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fl := strings.Fields(s.Text())
		if len(fl) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fl[1], 10, 64)
		if err != nil {
			continue
		}
		switch fl[0] {
		case "MemTotal:":
			total = kb << 10
		case "MemAvailable:":
			avail = kb << 10
		}
	}
	return total, avail
}

// cgroup is a process's memory cgroup and where its hierarchy is mounted.
type cgroup struct {
	version int
	path    string // the process's cgroup, as /proc/PID/cgroup names it
	root    string // the hierarchy's path that is mounted at mnt (a container sees its own)
	mnt     string // where the hierarchy is mounted, under the root directory
}

// dir returns the directory of cgroup p, or "" when p is outside the mounted part.
func (c cgroup) dir(p string) string {
	rel := p
	if c.root != "/" {
		if p != c.root && !strings.HasPrefix(p, c.root+"/") {
			return ""
		}
		rel = strings.TrimPrefix(p, c.root)
	}
	return filepath.Join(c.mnt, filepath.FromSlash(rel))
}

// findCgroup reads /proc/PID/cgroup and /proc/PID/mountinfo for the memory controller's
// hierarchy: v1 ("N:memory:/path" and a cgroup mount with the memory option) or v2 ("0::/path"
// and a cgroup2 mount). v1 wins where both are present, since the memory controller can be
// bound to only one and a v1 memory line says it is there.
func findCgroup(root, pid string) (cgroup, bool) {
	data, err := os.ReadFile(filepath.Join(root, "proc", pid, "cgroup"))
	if err != nil {
		return cgroup{}, false
	}
	var v1, v2 string
	var has1, has2 bool
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, has2 = parts[2], true
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			if ctl == "memory" {
				v1, has1 = parts[2], true
			}
		}
	}
	if !has1 && !has2 {
		return cgroup{}, false
	}
	mounts, err := mountinfo.Read(filepath.Join(root, "proc", pid, "mountinfo"))
	if err != nil {
		return cgroup{}, false
	}
	for _, m := range mounts {
		mnt := filepath.Join(root, m.Mountpoint)
		var c cgroup
		switch {
		case has1 && m.FSType == "cgroup" && m.HasOption("memory"):
			c = cgroup{version: 1, path: v1, root: m.Root, mnt: mnt}
		case !has1 && has2 && m.FSType == "cgroup2":
			c = cgroup{version: 2, path: v2, root: m.Root, mnt: mnt}
		default:
			continue
		}
		// The hierarchy may be mounted more than once (a container's view of a part of it, a
		// bind mount): take a mount whose root holds the process's cgroup.
		if c.dir(c.path) != "" {
			return c, true
		}
	}
	return cgroup{}, false
}

// limit returns the memory limit of the cgroup in dir (0: none, or unreadable). For v2 it is
// the lower of memory.max and memory.high (above memory.high the kernel throttles and
// reclaims hard, so it is the limit a workload lives within).
func (c cgroup) limit(dir string) int64 {
	if dir == "" {
		return 0
	}
	if c.version == 1 {
		lim := readLimit(filepath.Join(dir, "memory.limit_in_bytes"))
		// hierarchical_memory_limit covers ancestors that a container cannot see.
		if h := statValue(filepath.Join(dir, "memory.stat"), "hierarchical_memory_limit"); h > 0 && h < unlimited && (lim == 0 || h < lim) {
			lim = h
		}
		return lim
	}
	lim := readLimit(filepath.Join(dir, "memory.max"))
	if high := readLimit(filepath.Join(dir, "memory.high")); high > 0 && (lim == 0 || high < lim) {
		lim = high
	}
	return lim
}

// usage returns the cgroup's memory use, page cache included.
func (c cgroup) usage(dir string) int64 {
	if dir == "" {
		return 0
	}
	name := "memory.current"
	if c.version == 1 {
		name = "memory.usage_in_bytes"
	}
	v, _ := readInt(filepath.Join(dir, name))
	return v
}

// fileCache returns the cgroup's file pages (active and inactive), hierarchical in v1.
func (c cgroup) fileCache(dir string) int64 {
	if dir == "" {
		return 0
	}
	stat := filepath.Join(dir, "memory.stat")
	if c.version == 1 {
		return statValue(stat, "total_active_file") + statValue(stat, "total_inactive_file")
	}
	return statValue(stat, "active_file") + statValue(stat, "inactive_file")
}

// statValue returns the value of key in a memory.stat file (0 if absent).
func statValue(file, key string) int64 {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// readLimit reads a limit file: a number of bytes, or "max" (none). 0 means none.
func readLimit(file string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v >= unlimited {
		return 0
	}
	return v
}

func readInt(file string) (int64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}
