package fs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatsJSON checks that stats.json is what Options.Stats makes of the FUSE layer's
// counters, and the counters alone without it or when it fails.
func TestStatsJSON(t *testing.T) {
	m := &mount{start: time.Now().Add(-time.Second), inval: newInvalidator(1)}
	m.reads.Add(3)
	m.inval.skipped.Add(2)
	var c Counters
	require.NoError(t, json.Unmarshal(m.statsJSON(), &c))
	assert.Equal(t, os.Getpid(), c.PID)
	assert.EqualValues(t, 3, c.Reads)
	assert.NotNil(t, c.Readers, `"readers" is a list, empty without open files`)
	assert.GreaterOrEqual(t, c.Uptime, 1.0)
	assert.EqualValues(t, 2, c.PageCacheDropsSkipped)

	m.opt.Stats = func(c Counters) ([]byte, error) { return fmt.Appendf(nil, "reads %d\n", c.Reads), nil }
	assert.Equal(t, "reads 3\n", string(m.statsJSON()))

	m.opt.Stats = func(Counters) ([]byte, error) { return nil, errors.New("broken") }
	c = Counters{}
	require.NoError(t, json.Unmarshal(m.statsJSON(), &c), "a failing Options.Stats leaves the counters")
	assert.EqualValues(t, 3, c.Reads)
}
