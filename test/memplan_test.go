package test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMemoryPlanIsTheRealSize: info.json's memory plan counts a dataset as the bytes of its
// files, not each file rounded up to a 1 MiB cache page (a 1.5 MiB pack was "50 MiB", a 2 MB
// file in place "977 GiB"), and says what the cache's pages take beside it.
func TestMemoryPlanIsTheRealSize(t *testing.T) {
	p := packRaw(t, 384, "64KiB") // 1.5 MiB in 24 blocks, each with an ids file
	two := sparseFile(t, "two.bin", 2_000_000)
	for _, c := range []struct {
		name, data string
		args       []string
		size       int64 // the most its files hold
		says       string
	}{
		{"a 1.5 MiB pack", p.dir, nil, 384*recordSize + 384*8 + 4096, "the dataset's 1.5 MiB (48 MiB in the cache's pages)"},
		{"a 2 MB file in place", two, []string{"--record-size", "2"}, 2_000_000, "the dataset's 1.9 MiB"},
		{"a 2 MB file in 4 KiB blocks", two, []string{"--record-size", "2", "--block-size", "4KiB"}, 2_000_000, "the dataset's 1.9 MiB (489 MiB in the cache's pages)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := mount(t, c.data, append(c.args, "--readahead", "1MiB")...)
			info := mountInfo(t, m)
			mem := info["memory"].(map[string]any)
			size := int64(mem["dataset_bytes"].(float64))
			t.Logf("%v; %v (%v)", info["cache_size_reason"], info["direct_io_reason"], info["direct_io"])
			assert.LessOrEqual(t, size, c.size)
			assert.GreaterOrEqual(t, size, c.size*9/10)
			assert.Contains(t, info["cache_size_reason"], c.says)
			assert.NotContains(t, info["direct_io_reason"], "GiB")
		})
	}
}
