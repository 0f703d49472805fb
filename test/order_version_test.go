package test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Order version 2 (issue 39): tiny records stored in order are shuffled across windows of
// 512 MiB, their permutation computed per position instead of held (4 bytes a record).

// TestOrderVersion2TinyRecords mounts 6 M one-byte records in place with default flags: one
// window of all 6 blocks, more than 2^22 records, permuted by the keyed bijection. Every
// record is in the epoch once with its byte, positions agree with docs/examples/
// shuffle_order.py (an independent implementation of SHUFFLE.md), info.json names the
// version, and --order-version 1 serves the old order (windows of 4 blocks) and says why.
func TestOrderVersion2TinyRecords(t *testing.T) {
	requireFUSE(t)
	const n = 6_000_000
	data := make([]byte, n)
	rng := rand.New(rand.NewPCG(39, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	src := filepath.Join(t.TempDir(), "bytes.bin")
	require.NoError(t, os.WriteFile(src, data, 0o644))

	m := mount(t, src, "--dtype", "uint8", "--seed", "5")
	order := mountOrder(t, m)
	assert.Equal(t, 6, order.Mix, order.Why)
	assert.Equal(t, []int{2}, order.Versions)
	assert.Empty(t, order.Warning)
	info := readInfo(t, m)
	assert.EqualValues(t, 2, info["order_version"])

	ids := readIDs(t, m.path("epoch-0001.ids"))
	require.Len(t, ids, n)
	epoch, err := os.ReadFile(m.path("epoch-0001"))
	require.NoError(t, err)
	require.Len(t, epoch, n)
	seen := make([]bool, n)
	for i, id := range ids {
		require.False(t, seen[id], "record %d twice", id)
		seen[id] = true
		if epoch[i] != data[id] {
			t.Fatalf("position %d: byte %d, record %d holds %d", i, epoch[i], id, data[id])
		}
	}

	// The reference implementation, at positions spread over the epoch (it computes each one
	// alone: the bijection needs no permutation).
	counts := []string{"1048576", "1048576", "1048576", "1048576", "1048576", strconv.Itoa(n - 5*1048576)}
	var pos []string
	for p := 0; p < n; p += 599_999 {
		pos = append(pos, strconv.Itoa(p))
	}
	pos = append(pos, strconv.Itoa(n-1))
	out := sh(t, fmt.Sprintf("python3 ../docs/examples/shuffle_order.py --counts %s --seed 5 --epoch 1 --mix 6 --positions %s",
		strings.Join(counts, ","), strings.Join(pos, ",")))
	for i, line := range strings.Fields(out) {
		p, _ := strconv.Atoi(pos[i])
		assert.Equal(t, line, strconv.FormatUint(ids[p], 10), "position %d", p)
	}

	// Version 1: the window the permutation's state allowed, said in the warning.
	old := mount(t, src, "--dtype", "uint8", "--seed", "5", "--order-version", "1")
	order = mountOrder(t, old)
	assert.Equal(t, 4, order.Mix, "2^22 one-byte records: 4 blocks of 1 MiB")
	assert.Equal(t, []int{1}, order.Versions)
	assert.Contains(t, order.Warning, "order version 1")
	oldIDs := readIDs(t, old.path("epoch-0001.ids"))
	assert.NotEqual(t, ids[:1000], oldIDs[:1000])
	// Version 1's permutations are checked against the reference by TestMount.
}

// TestOrderStatsTinyRecordsDefault: issue 39's floors, measured by order --stats with default
// flags over sparse files (the order reads no data): 60 M two-byte records and 10^9 four-byte
// records draw at least 0.7x the distinct blocks per batch of 256 of a uniform shuffle.
func TestOrderStatsTinyRecordsDefault(t *testing.T) {
	for _, c := range []struct {
		dtype string
		size  int64
	}{{"uint16", 120_000_000}, {"uint32", 4_000_000_000}} {
		src := sparseFile(t, c.dtype+".bin", c.size)
		out, errOut, code := run(t, "order", src, "--dtype", c.dtype, "--stats")
		require.Zero(t, code, errOut)
		assert.NotContains(t, errOut, "far from uniform")
		assert.Contains(t, out, "order version 2")
		m := regexp.MustCompile(`distinct blocks per batch of 256\s+([0-9.]+)\s+([0-9.]+)`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		ours, _ := strconv.ParseFloat(m[1], 64)
		uniform, _ := strconv.ParseFloat(m[2], 64)
		t.Logf("%s, %d bytes: %.1f distinct blocks per batch of 256, uniform %.1f (%.2fx)", c.dtype, c.size, ours, uniform, ours/uniform)
		assert.GreaterOrEqual(t, ours, 0.7*uniform, out)
	}
}

// readInfo returns a mount's .blockfs/info.json.
func readInfo(t *testing.T, m *mounted) map[string]any {
	raw, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	var info map[string]any
	require.NoError(t, json.Unmarshal(raw, &info))
	return info
}
