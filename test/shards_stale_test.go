package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShardEditedInPlace: a shard edited in place with its size and modification time kept
// looks unchanged to a mount. The read that finds a value out of step with the automatic
// index gives EIO and marks that index stale; the next mount indexes the shards again and
// serves the new bytes, instead of EIO on every mount after. verify of the shards marks it
// too, and says where it is.
func TestShardEditedInPlace(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	shards := filepath.Join(dir, "shards")
	require.NoError(t, os.Mkdir(shards, 0o755))
	_, samples := writeShards(t, shards, 40, 20)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache")) // this test's automatic index
	sum := sha256.Sum256([]byte(shards))
	index := filepath.Join(dir, "cache", "blockfs", "index", hex.EncodeToString(sum[:8]))
	args := []string{"--cache-size", "64MiB", "--shuffle", "none"}

	m := mount(t, shards, args...)
	_, err := os.ReadFile(m.path("epoch-0000.jpg"))
	require.NoError(t, err)
	m.stop()
	require.FileExists(t, filepath.Join(index, "blockfs-index.json"))

	// Sample 3's jpg, one byte changed where it is; size and times as they were.
	shard := filepath.Join(shards, "shard-0000.tar")
	st, err := os.Stat(shard)
	require.NoError(t, err)
	b, err := os.ReadFile(shard)
	require.NoError(t, err)
	at := bytes.Index(b, samples[3]["jpg"])
	require.Positive(t, at)
	b[at] ^= 0xff
	require.NoError(t, os.WriteFile(shard, b, 0o644))
	require.NoError(t, os.Chtimes(shard, st.ModTime(), st.ModTime()))

	m = mount(t, shards, args...)
	_, err = os.ReadFile(m.path("epoch-0000.jpg"))
	require.ErrorIs(t, err, syscall.EIO, "the values do not match the index")
	m.stop()
	assert.Contains(t, m.stderr.String(), "a value of field \"jpg\" changed since it was indexed")
	stale, err := os.ReadFile(filepath.Join(index, "stale"))
	require.NoError(t, err, "the read marked the index stale")
	assert.Contains(t, string(stale), "corrupt dataset")

	m = mount(t, shards, args...)
	jpg := fieldValues(t, m.path("epoch-0000.jpg"), 0)
	ids := readIDs(t, m.path("epoch-0000.ids"))
	for i, v := range jpg {
		want := samples[ids[i]]["jpg"]
		if ids[i] == 3 {
			want = append([]byte{want[0] ^ 0xff}, want[1:]...)
		}
		require.Equal(t, want, v, "sample %d", ids[i])
	}
	assert.NoFileExists(t, filepath.Join(index, "stale"), "indexed again: the mark went with the old index")

	// verify finds the next edit, of the mount point or of the shards, says where the
	// automatic index is, and marks it.
	b[at+1] ^= 0xff
	require.NoError(t, os.WriteFile(shard, b, 0o644))
	require.NoError(t, os.Chtimes(shard, st.ModTime(), st.ModTime()))
	for _, data := range []string{m.dir, shards} {
		_, errs, code := run(t, "verify", data)
		assert.Equal(t, 1, code, "verify %s", data)
		assert.Contains(t, errs, "(their automatic index "+index+" is marked stale)", "verify %s", data)
		assert.FileExists(t, filepath.Join(index, "stale"))
		require.NoError(t, os.Remove(filepath.Join(index, "stale")))
	}
	m.stop()
	assert.Contains(t, m.stderr.String(), "a read found it out of step with the shards")
	assert.Contains(t, m.stderr.String(), "indexing them again")
}
