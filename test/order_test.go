package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOrderCommand: blockfs order --ids prints what the mount's .ids files hold, for epochs
// and shards, and --stats reports the extremes right (none: one block per batch and the same
// order every epoch; full with mix: more blocks per batch).
func TestOrderCommand(t *testing.T) {
	p := packRaw(t, 1000, "16KiB", "--no-shuffle") // 4 records a block, 250 blocks
	m := mount(t, p.dir, "--seed", "6", "--mix", "3", "--cache-size", "4MiB", "--readahead", "256KiB")
	for _, c := range []struct{ file, shard string }{{"epoch-0002.ids", ""}, {"shard-1-of-3/epoch-0005.ids", "1/3"}} {
		want := idsText(t, m.path(c.file))
		epoch := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(c.file), "epoch-"), ".ids")
		e, _ := strconv.Atoi(epoch)
		args := []string{"order", p.dir, "--ids", "--seed", "6", "--mix", "3", "--epoch", strconv.Itoa(e)}
		if c.shard != "" {
			args = append(args, "--shard", c.shard)
		}
		assert.Equal(t, want, mustRun(t, args...), c.file)
	}

	labels := filepath.Join(t.TempDir(), "labels.txt")
	var lb strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&lb, "%d\n", i/100) // sorted by class, as the source is
	}
	require.NoError(t, os.WriteFile(labels, []byte(lb.String()), 0o644))
	none := mustRun(t, "order", p.dir, "--stats", "--shuffle", "none", "--labels", labels)
	assert.Regexp(t, `distinct blocks per batch of 32 +8\.0 `, none)
	assert.Regexp(t, `position correlation with next epoch +1\.000 `, none)
	assert.Regexp(t, `label TV distance, batch of 32 +0\.(8|9)\d\d `, none)
	mixed := mustRun(t, "order", p.dir, "--stats", "--mix", "8", "--labels", labels)
	assert.Regexp(t, `distinct blocks per batch of 32 +(7|8)\.\d `, mixed)
	_, errs, code := run(t, "order", p.dir)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "exactly one of --ids and --stats")
	_, errs, code = run(t, "order", p.dir, "--stats", "--labels", filepath.Join(t.TempDir(), "none"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "--labels")
}
