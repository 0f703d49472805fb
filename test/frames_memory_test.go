package test

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/layout"
	"github.com/blockfs/blockfs/source/stack"
)

// TestLargeFramesMemory: compressed frames of 64 MiB, the largest FORMAT.md allows (written
// by the layout package, as another writer might; pack writes 1 MiB), read by two `dd` at once
// with --cache-size 128MiB in a 1.5 GiB cgroup: the daemon lives, serves the exact bytes and
// stays within its cache, its decompression's bound (stack.DecodeMemory) and the constant.
// Before, each read allocated its compressed frames before it waited for a decode slot, and
// each slot its 64 MiB buffer: one dd had the daemon OOM-killed. Then its buffers came from a
// sync.Pool the collector emptied, and were made again: 340-445 MiB against the 320 here.
func TestLargeFramesMemory(t *testing.T) {
	requireFUSE(t)
	const (
		frame   = layout.MaxFrame
		rs      = 4096
		records = 40000 // 156 MiB in blocks of 64 MiB: a frame a block
	)
	cg := newMemCgroup(t, 1536<<20)
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := layout.Create(dir, layout.WriterOptions{Kind: layout.Fixed, RecordSize: rs, BlockSize: 64 << 20, IDs: true,
		Compress: &layout.Compression{Codec: layout.CodecZstd, Level: 1, Frame: frame}}, false)
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(5, 1))
	rec := make([]byte, rs)
	words := []string{"epoch ", "block ", "frame ", "shuffle ", "record "}
	for i := range records {
		n := copy(rec, fmt.Sprintf("%08d ", i))
		for n < rs {
			n += copy(rec[n:], words[r.IntN(len(words))])
		}
		require.NoError(t, w.Append(uint64(i), rec))
	}
	m, err := w.Commit()
	require.NoError(t, err)
	require.NotNil(t, m.Compression, "compressed: text shrinks")
	require.EqualValues(t, frame, m.Compression.Frame)

	mnt := mountBinary(t, cg.wrap(t, bin), dir, t.TempDir(), "--cache-size", "128MiB")
	out, err := exec.Command("sh", "-c", fmt.Sprintf("for e in 0 1; do dd if=%s/epoch-000$e of=/dev/null bs=1M status=none & done; wait", mnt.dir)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Zero(t, cg.oomKills(t), "nothing was OOM-killed: %s", tail(mnt.stderr.String()))
	got := readWhole(t, mnt.path("epoch-0002"), 200<<20)
	ids := readIDs(t, mnt.path("epoch-0002.ids"))
	require.Len(t, got, records*rs)
	for p := 0; p < records; p += 997 {
		assert.Equal(t, fmt.Sprintf("%08d ", ids[p]), string(got[p*rs:p*rs+9]), "position %d", p)
	}
	hwm := peakRSS(t, mnt.cmd.Process.Pid) << 10
	t.Logf("daemon peak RSS %d MiB; cache 128 MiB, decompression's bound %d MiB", hwm>>20, stack.DecodeMemory(frame)>>20)
	assert.LessOrEqual(t, hwm, 128<<20+stack.DecodeMemory(frame)+64<<20, "peak RSS: cache + decompression + 64 MiB")
}
