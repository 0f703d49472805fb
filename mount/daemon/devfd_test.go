package daemon

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestServedHereWithoutFuse: a process that holds no /dev/fuse serves no mount.
func TestServedHereWithoutFuse(t *testing.T) {
	assert.Empty(t, servedHere())
}
