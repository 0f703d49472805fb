package test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A dataset with fields stored in order (every one is: pack keeps its samples' input order)
// is mounted within the --cache-size given, as a plain dataset is: a readahead the user did not
// ask for takes at most a quarter of it, and the automatic window the rest of half of it;
// without --cache-size (or with a large one) the window and readahead are what they were.

// writeSmallShards writes n samples as WebDataset tar shards of per samples each with Python's
// tarfile: NNNNNN.bin (smallBin(i)) and NNNNNN.cls (i % 10 as text). It returns their glob.
func writeSmallShards(t *testing.T, dir string, n, per int) string {
	t.Helper()
	script := fmt.Sprintf(`
import io, os, struct, sys, tarfile
n, per, out = %d, %d, sys.argv[1]
for s in range((n + per - 1) // per):
    with tarfile.open(os.path.join(out, "shard-%%04d.tar" %% s), "w") as t:
        for i in range(s * per, min(n, (s + 1) * per)):
            for ext, data in (("bin", struct.pack("<I", i) * 250), ("cls", str(i %% 10).encode())):
                ti = tarfile.TarInfo("%%06d.%%s" %% (i, ext))
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
`, n, per)
	out, err := exec.Command("/usr/bin/python3", "-c", script, dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return filepath.Join(dir, "shard-*.tar")
}

// smallBin is sample i's bin field: i as 4 little-endian bytes, 250 times.
func smallBin(i uint64) []byte {
	out := make([]byte, 0, 1000)
	for range 250 {
		out = binary.LittleEndian.AppendUint32(out, uint32(i))
	}
	return out
}

// fieldsCacheInfo is what the test reads of a mount's info.json.
type fieldsCacheInfo struct {
	Blocks    int   `json:"blocks"`
	Readahead int64 `json:"readahead"`
	CacheSize int64 `json:"cache_size"`
	Order     struct {
		Mix  int    `json:"mix"`
		Auto bool   `json:"auto"`
		Why  string `json:"why"`
	} `json:"order"`
}

func readFieldsCacheInfo(t *testing.T, m *mounted) fieldsCacheInfo {
	t.Helper()
	raw, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	var info fieldsCacheInfo
	require.NoError(t, json.Unmarshal(raw, &info))
	return info
}

func TestFieldsCacheSize(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	const n = 20000
	glob := writeSmallShards(t, dir, n, 5000)
	ds := filepath.Join(dir, "ds")
	mustRun(t, "pack", "--quiet", "--block-size", "512KiB", glob, ds)

	// Without --cache-size: the whole data in one window, the default readahead.
	free := readFieldsCacheInfo(t, mount(t, ds))
	require.Greater(t, free.Blocks, 16)
	assert.Equal(t, free.Blocks, free.Order.Mix, "%s", free.Order.Why)
	assert.EqualValues(t, 64<<20, free.Readahead)
	// A large --cache-size keeps them.
	large := readFieldsCacheInfo(t, mount(t, ds, "--cache-size", "1GiB"))
	assert.Equal(t, free.Blocks, large.Order.Mix, "%s", large.Order.Why)
	assert.EqualValues(t, 64<<20, large.Readahead)

	// --cache-size 64MiB: the readahead (a quarter) and the window (two 1 MiB pages a block:
	// bin's and cls's) within half of it; every sample once, exact.
	m := mount(t, ds, "--cache-size", "64MiB")
	info := readFieldsCacheInfo(t, m)
	assert.EqualValues(t, 16<<20, info.Readahead)
	assert.True(t, info.Order.Auto)
	assert.Equal(t, 8, info.Order.Mix, "%s", info.Order.Why)
	assert.Contains(t, info.Order.Why, "the window and readahead must fit half the --cache-size, 32 MiB")
	assert.LessOrEqual(t, info.CacheSize, int64(64<<20))
	ids := readIDs(t, m.path("epoch-0000.ids"))
	bins := fieldValues(t, m.path("epoch-0000.bin"), 0)
	clss := fieldValues(t, m.path("epoch-0000.cls"), 0)
	require.Len(t, ids, n)
	require.Len(t, bins, n)
	require.Len(t, clss, n)
	seen := make([]bool, n)
	for k, id := range ids {
		require.Less(t, id, uint64(n))
		require.False(t, seen[id], "sample %d twice", id)
		seen[id] = true
		require.Equal(t, smallBin(id), bins[k], "sample %d", id)
		require.Equal(t, fmt.Sprint(id%10), string(clss[k]), "sample %d", id)
	}

	// A readahead the user asked for is theirs: not lowered, the window fitted beside it.
	asked := readFieldsCacheInfo(t, mount(t, ds, "--cache-size", "64MiB", "--readahead", "40MiB"))
	assert.EqualValues(t, 40<<20, asked.Readahead)
	assert.Equal(t, 1, asked.Order.Mix, "%s", asked.Order.Why)
}
