package stack

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBufList: buffers come back for the next get (the smallest that serves), the buffers in
// use and kept stay within keep, and a get that no kept buffer serves drops kept ones to make
// room, so that the kept sizes follow the reads instead of freezing at the first ones.
func TestBufList(t *testing.T) {
	l := &bufList{keep: 100}
	a, b := l.get(30), l.get(40)
	l.put(a)
	l.put(b)
	assert.EqualValues(t, 70, l.held)
	c := l.get(35)
	assert.Same(t, b, c, "the smallest kept buffer that serves")
	assert.Len(t, *c, 40, "its whole capacity")
	l.put(c)
	// 60 fits no kept buffer: the 30 and then the 40 go (70 + 60 > 100).
	d := l.get(60)
	assert.Len(t, *d, 60)
	assert.EqualValues(t, 40, l.held, "30 dropped, 40 + 60 in use and kept")
	e := l.get(70) // 40 + 60 + 70 > 100: the 40 goes too
	assert.Zero(t, l.held)
	l.put(d) // 70 still in use + 60 > 100: not kept
	l.put(e)
	require.Len(t, l.free, 1)
	assert.EqualValues(t, 70, l.held)
	assert.Zero(t, l.out)
	assert.Same(t, e, l.get(60), "the kept one serves")
}
