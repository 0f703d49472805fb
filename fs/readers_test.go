package fs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A reader's position is where the read that started last ended, whatever order concurrent
// reads (the kernel's readahead) end in.
func TestReaderPositionByStart(t *testing.T) {
	var rt readTimes
	r := &reader{size: 300}
	t0 := time.Now()
	rt.read(r, t0.Add(2*time.Millisecond), time.Millisecond, 0, 300, 100) // started last, ended first
	rt.read(r, t0.Add(time.Millisecond), 5*time.Millisecond, 0, 200, 100)
	rt.read(r, t0, 9*time.Millisecond, 0, 100, 100)
	assert.EqualValues(t, 300, r.Position())
	rt.read(r, t0.Add(3*time.Millisecond), time.Millisecond, 0, 50, 50) // a seek back, started later
	assert.EqualValues(t, 50, r.Position())
}
