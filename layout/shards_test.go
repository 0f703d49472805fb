package layout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An index manifest whose counts could overflow what they size (a tampered one) is refused
// before anything is sized from it.
func TestShardsIndexValidateBounds(t *testing.T) {
	ok := func() *ShardsIndex {
		return &ShardsIndex{Format: IndexFormat, Version: IndexVersion, Input: "tfrecord", Source: "/d", Records: 10,
			Fields: []string{"record"}, Shards: []IndexShard{{Name: "a.tfrecord", Size: 4096}},
			Blocks: []IndexBlock{{Shard: 0, Records: 10, Bytes: []uint64{100}, CRC32C: []uint32{1}, OffsetsCRC32C: []uint32{2}, MembersCRC32C: []uint32{3}}}}
	}
	require.NoError(t, ok().Validate("x"))
	for name, bad := range map[string]func(ix *ShardsIndex){
		"records past the shard's room": func(ix *ShardsIndex) { ix.Blocks[0].Records, ix.Records = 1<<61, 1<<61 },
		"bytes past the shard":          func(ix *ShardsIndex) { ix.Blocks[0].Bytes[0] = 5000 },
		"a shard out of range":          func(ix *ShardsIndex) { ix.Blocks[0].Shard = 1 },
		"records that do not add up":    func(ix *ShardsIndex) { ix.Records = 11 },
		"a stored field it lacks":       func(ix *ShardsIndex) { ix.Stored = []string{"label"} },
		"a path leaving the source":     func(ix *ShardsIndex) { ix.Shards[0].Name = "../a.tfrecord" },
	} {
		ix := ok()
		bad(ix)
		err := ix.Validate("x")
		assert.Error(t, err, name)
	}
}
