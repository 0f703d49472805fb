package mount

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/blockfs/blockfs/internal/optname"
)

// TestOptionErrorsWrapUsage: an option's error from the packages mount calls (--metrics'
// address, mount/report; --users-lock's file, mount/daemon) wraps ErrUsage and names its
// option, as every other option's error does.
func TestOptionErrorsWrapUsage(t *testing.T) {
	o := Options{Metrics: "no-port"}
	err := o.Check()
	assert.ErrorIs(t, err, ErrUsage)
	assert.Equal(t, "metrics", optname.Of(err))

	p := &Plan{opt: Options{UsersLock: filepath.Join(t.TempDir(), "missing", "lock")}}
	err = p.checkUsers()
	assert.ErrorIs(t, err, ErrUsage)
	assert.Equal(t, "users-lock", optname.Of(err))
}
