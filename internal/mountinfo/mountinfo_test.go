package mountinfo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	const data = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
33 24 0:28 /docker/abc /sys/fs/cgroup/memory ro,relatime - cgroup cgroup rw,memory
90 22 0:50 / /mnt/my\040data rw,nosuid master:7 - fuse.blockfs train ro,user_id=0
malformed line
`
	ms := Parse(data)
	require.Len(t, ms, 3)
	assert.Equal(t, Mount{Dev: "254:0", Root: "/", Mountpoint: "/", FSType: "ext4", Super: "rw"}, ms[0])
	assert.Equal(t, "/docker/abc", ms[1].Root)
	assert.True(t, ms[1].HasOption("memory"))
	assert.False(t, ms[1].HasOption("mem"))
	assert.Equal(t, "/mnt/my data", ms[2].Mountpoint, "optional fields and escapes")
	assert.Equal(t, "fuse.blockfs", ms[2].FSType)
	assert.Equal(t, "0:50", ms[2].Dev)
}

func TestUnescape(t *testing.T) {
	assert.Equal(t, "/mnt/a b", unescape(`/mnt/a\040b`))
	assert.Equal(t, `/a\b`, unescape(`/a\134b`))
	assert.Equal(t, "/plain", unescape("/plain"))
	assert.Equal(t, `/odd\9`, unescape(`/odd\9`), "not an escape: kept")
}
