package sysmem

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const gib = 1 << 30

// fakeRoot writes files (path relative to root -> contents) under a new directory.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(s), 0o644))
	}
	return root
}

const meminfo24 = "MemTotal:       25165824 kB\nMemFree:        20000000 kB\nMemAvailable:   23068672 kB\nCached:  1000 kB\n"

const mountsV1 = `24 23 0:21 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
30 24 0:25 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 24 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`

const mountsV2 = `24 23 0:21 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate
`

func TestRAMOnly(t *testing.T) {
	root := fakeRoot(t, map[string]string{"proc/meminfo": meminfo24})
	m := ReadAt(root, "self")
	assert.EqualValues(t, 24*gib, m.RAM)
	assert.EqualValues(t, 22*gib, m.Available)
	assert.Zero(t, m.Limit)
	assert.Zero(t, m.Version)
	assert.EqualValues(t, 24*gib, m.Total())
	assert.EqualValues(t, 22*gib, m.Free())
	assert.Equal(t, "RAM", m.Source())
}

func TestUnknown(t *testing.T) {
	m := ReadAt(t.TempDir(), "self")
	assert.Zero(t, m.Total())
	assert.Zero(t, m.Free())
	assert.Equal(t, "unknown", m.Source())
}

// TestCgroupV1: the limit of the process's own v1 memory cgroup, its usage and file pages.
func TestCgroupV1(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"proc/meminfo":        meminfo24,
		"proc/self/cgroup":    "5:devices:/\n4:memory:/job/7\n3:cpu:/\n",
		"proc/self/mountinfo": mountsV1,
		"sys/fs/cgroup/memory/memory.limit_in_bytes":       "9223372036854771712\n",
		"sys/fs/cgroup/memory/job/memory.limit_in_bytes":   "9223372036854771712\n",
		"sys/fs/cgroup/memory/job/7/memory.limit_in_bytes": "2147483648\n",
		"sys/fs/cgroup/memory/job/7/memory.usage_in_bytes": "1610612736\n",
		"sys/fs/cgroup/memory/job/7/memory.stat": "cache 100\nactive_file 1\ninactive_file 2\n" +
			"hierarchical_memory_limit 2147483648\ntotal_active_file 268435456\ntotal_inactive_file 268435456\n",
	})
	m := ReadAt(root, "self")
	assert.Equal(t, 1, m.Version)
	assert.Equal(t, "/job/7", m.Cgroup)
	assert.EqualValues(t, 2*gib, m.Limit)
	assert.EqualValues(t, 2*gib, m.Total())
	assert.EqualValues(t, 1536<<20, m.Usage)
	assert.EqualValues(t, 512<<20, m.Reclaimable)
	// 2 GiB - 1.5 GiB used + 0.5 GiB of page cache it can drop.
	assert.EqualValues(t, 1*gib, m.Free())
	assert.Equal(t, "cgroup v1 limit of /job/7", m.Source())
}

// TestCgroupV1Hierarchical: a limit set on an ancestor (a pod) binds the leaf; a container
// that sees only its own part of the hierarchy reads it from hierarchical_memory_limit.
func TestCgroupV1Hierarchical(t *testing.T) {
	t.Run("ancestor visible", func(t *testing.T) {
		root := fakeRoot(t, map[string]string{
			"proc/meminfo":        meminfo24,
			"proc/self/cgroup":    "4:memory:/pod/c1\n",
			"proc/self/mountinfo": mountsV1,
			"sys/fs/cgroup/memory/pod/memory.limit_in_bytes":    "3221225472\n",
			"sys/fs/cgroup/memory/pod/memory.usage_in_bytes":    "1073741824\n",
			"sys/fs/cgroup/memory/pod/c1/memory.limit_in_bytes": "9223372036854771712\n",
		})
		m := ReadAt(root, "self")
		assert.EqualValues(t, 3*gib, m.Limit)
		assert.Equal(t, "/pod", m.Cgroup, "the cgroup whose limit binds")
		assert.EqualValues(t, 1*gib, m.Usage, "the usage of the cgroup whose limit binds")
	})
	t.Run("container's own view", func(t *testing.T) {
		// In a container the hierarchy's root is the container's cgroup, mounted at /sys/fs/cgroup/memory.
		root := fakeRoot(t, map[string]string{
			"proc/meminfo":        meminfo24,
			"proc/self/cgroup":    "4:memory:/docker/abc\n",
			"proc/self/mountinfo": "33 24 0:28 /docker/abc /sys/fs/cgroup/memory ro,relatime - cgroup cgroup rw,memory\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.stat":           "hierarchical_memory_limit 1073741824\n",
		})
		m := ReadAt(root, "self")
		assert.EqualValues(t, 1*gib, m.Limit)
		assert.EqualValues(t, 1*gib, m.Total())
	})
}

// TestCgroupV2: memory.max of the tightest of the cgroup and its ancestors; memory.high too.
func TestCgroupV2(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"proc/meminfo":                                  meminfo24,
		"proc/self/cgroup":                              "0::/user.slice/job/step\n",
		"proc/self/mountinfo":                           mountsV2,
		"sys/fs/cgroup/user.slice/memory.max":           "max\n",
		"sys/fs/cgroup/user.slice/job/memory.max":       "6442450944\n",
		"sys/fs/cgroup/user.slice/job/memory.current":   "2147483648\n",
		"sys/fs/cgroup/user.slice/job/memory.stat":      "anon 1073741824\nactive_file 536870912\ninactive_file 536870912\n",
		"sys/fs/cgroup/user.slice/job/step/memory.max":  "max\n",
		"sys/fs/cgroup/user.slice/job/step/memory.high": "max\n",
	})
	m := ReadAt(root, "self")
	assert.Equal(t, 2, m.Version)
	assert.Equal(t, "/user.slice/job", m.Cgroup)
	assert.EqualValues(t, 6*gib, m.Limit)
	assert.EqualValues(t, 6*gib, m.Total())
	assert.EqualValues(t, 5*gib, m.Free(), "6 GiB - 2 GiB used + 1 GiB of page cache")
	assert.Equal(t, "cgroup v2 limit of /user.slice/job", m.Source())

	// memory.high below memory.max is the limit a workload lives within.
	require.NoError(t, os.WriteFile(filepath.Join(root, "sys/fs/cgroup/user.slice/job/step/memory.high"), []byte("4294967296\n"), 0o644))
	m = ReadAt(root, "self")
	assert.EqualValues(t, 4*gib, m.Limit)
	assert.Equal(t, "/user.slice/job/step", m.Cgroup)
}

// TestLimitAboveRAM: a cgroup limit above the RAM does not raise the total.
func TestLimitAboveRAM(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"proc/meminfo":                 "MemTotal: 4194304 kB\nMemAvailable: 3145728 kB\n",
		"proc/self/cgroup":             "0::/big\n",
		"proc/self/mountinfo":          mountsV2,
		"sys/fs/cgroup/big/memory.max": "17179869184\n",
	})
	m := ReadAt(root, "self")
	assert.EqualValues(t, 16*gib, m.Limit)
	assert.EqualValues(t, 4*gib, m.Total())
	assert.Equal(t, "RAM", m.Source())
	assert.EqualValues(t, 3*gib, m.Free(), "the machine's available memory binds")
}

// TestReadSelf: on this machine, the RAM is known and the total never exceeds it.
func TestReadSelf(t *testing.T) {
	m := Read()
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	assert.Positive(t, m.RAM)
	assert.Positive(t, m.Available)
	assert.LessOrEqual(t, m.Total(), m.RAM)
	assert.LessOrEqual(t, m.Free(), m.Total())
}

// TestContains: within a cgroup limit, only that cgroup and those below it share the memory;
// without one, every cgroup does.
func TestContains(t *testing.T) {
	limited := Memory{RAM: 24 * gib, Limit: 4 * gib, Cgroup: "/job", Version: 2}
	assert.True(t, limited.Contains("/job"))
	assert.True(t, limited.Contains("/job/step"))
	assert.False(t, limited.Contains("/jobs"))
	assert.False(t, limited.Contains("/other"))
	assert.False(t, limited.Contains(""))
	host := Memory{RAM: 24 * gib, Cgroup: "/user.slice", Version: 2}
	assert.True(t, host.Contains("/other"))
	assert.True(t, host.Contains(""))
}

// TestMountWithTheCgroup: of two mounts of the v1 memory hierarchy, the one whose root holds
// the process's cgroup is read (a container's own view mounted first, the host's after).
func TestMountWithTheCgroup(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"proc/meminfo":     meminfo24,
		"proc/self/cgroup": "4:memory:/job/7\n",
		"proc/self/mountinfo": "33 24 0:28 /other /mnt/other-view rw - cgroup cgroup rw,memory\n" +
			"34 24 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
		"sys/fs/cgroup/memory/job/7/memory.limit_in_bytes": "1073741824\n",
	})
	m := ReadAt(root, "self")
	assert.EqualValues(t, gib, m.Limit)
}
