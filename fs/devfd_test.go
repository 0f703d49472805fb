package fs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFuseFD: the mount points go-fuse takes for a descriptor, and only those.
func TestFuseFD(t *testing.T) {
	for mnt, want := range map[string]int{
		"/dev/fd/3": 3, "/dev/fd/17": 17, "/dev/fd/1": 1,
		"/dev/fd/0": -1, "/dev/fd/-3": -1, "/dev/fd/x": -1, "/dev/fd/": -1,
		"/proc/self/fd/3": -1, "dev/fd/3": -1, "/dev/fd/3/": -1, "/mnt/train": -1,
	} {
		assert.Equal(t, want, FuseFD(mnt), mnt)
	}
}
