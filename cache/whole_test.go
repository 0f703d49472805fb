package cache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPinWholeWanted: with Options.Whole, PinPages of a few pages of a file loads the file
// whole in one read and pins for the caller only the pages it wants; the others are held as
// read ahead, unpinned.
func TestPinWholeWanted(t *testing.T) {
	src := newSource(8 * ps)
	c, err := New(src, Options{Size: 16 * ps, PageSize: ps, MaxRead: 4 * ps, Workers: 1, Whole: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	want := []uint64{1<<1 | 1<<2 | 1<<6}
	var pins Pins
	run, err := c.PinPages(bg, nil, &pins, 0, 1, 7, want)
	require.NoError(t, err)
	assert.Equal(t, []readCall{{0, 0, 8 * ps}}, src.calls(), "the file whole, in one read")
	for _, p := range []int64{1, 2, 6} {
		assert.Equal(t, src.files[0][p*ps:(p+1)*ps], joined(run, p*ps, ps), "page %d", p)
	}
	c.mu.Lock()
	assert.Equal(t, 3, c.pinned, "only the pages wanted are pinned")
	assert.Equal(t, 5, c.ahead.Len(), "the rest are held as read ahead")
	c.mu.Unlock()
	pins.Release()
	slotsSettled(t, c)
}
