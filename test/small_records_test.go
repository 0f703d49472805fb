package test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBillionSmallRecordsInPlace mounts a sparse file of 10^9 records of 4 bytes in place (a
// 16 MiB block is 4M records, so one window's permutation is as large as its data): the mount
// must be ready in under 2 s, and while an epoch and its .ids are read at once (and then
// another part of the epoch) the daemon's peak RSS must stay within --cache-size + 64 MiB.
func TestBillionSmallRecordsInPlace(t *testing.T) {
	requireFUSE(t)
	src := sparseFile(t, "small.bin", 1_000_000_000*4)
	m := mountWithin(t, 2*time.Second, src, "--record-size", "4", "--cache-size", "128MiB", "--readahead", "16MiB")
	st, err := os.Stat(m.path("epoch-0003.ids"))
	require.NoError(t, err)
	assert.EqualValues(t, int64(1_000_000_000)*8, st.Size())
	t0 := time.Now()
	sh(t, fmt.Sprintf(`set -e
dd if=%[1]s/epoch-0003 of=/dev/null bs=1M count=192 status=none &
dd if=%[1]s/epoch-0003.ids of=/dev/null bs=1M count=192 status=none &
wait
dd if=%[1]s/epoch-0003 of=/dev/null bs=1M count=64 skip=3000 status=none`, m.dir))
	t.Logf("read 448 MiB in %v", time.Since(t0))
	hwm := peakRSS(t, m.cmd.Process.Pid)
	t.Logf("daemon peak RSS %d KiB with a 128 MiB cache over 10^9 records of 4 bytes", hwm)
	assert.LessOrEqual(t, hwm, int64(128+64)<<10, "peak RSS in KiB")
}
