package pack

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLockHostName: a store lock's host, which anyone who can write the store wrote, shows as
// written only where it is a host name; otherwise quoted and cut, so that a refusal stays one
// short line.
func TestLockHostName(t *testing.T) {
	assert.Equal(t, "node-7.cluster.local", hostName("node-7.cluster.local"))
	assert.Equal(t, `"a\nb"`, hostName("a\nb"))
	assert.Equal(t, `""`, hostName(""))
	long := hostName(strings.Repeat("x", 1<<20))
	assert.Less(t, len(long), 80)
	assert.True(t, strings.HasPrefix(long, `"xxxx`))
}
