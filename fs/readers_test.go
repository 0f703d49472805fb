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

// places lists the readers of epochs' records that read lately, by file: not sidecars, not
// readers that opened and have not read, not readers that stopped reading or closed.
func TestReaderPlaces(t *testing.T) {
	var rt readTimes
	now := time.Now()
	data1 := rt.openBy(1, "epoch-0000", 100, true)
	data2 := rt.openBy(2, "shard-1-of-2/epoch-0000", 100, true)
	data3 := rt.openBy(4, "epoch-0000", 100, true)
	ids := rt.openBy(1, "epoch-0000.ids", 100, false)
	rt.openBy(3, "epoch-0001", 100, true) // never read
	rt.read(data1, now, time.Millisecond, 0, 10, 10)
	rt.read(data3, now, time.Millisecond, 0, 70, 10)
	rt.read(data2, now.Add(-time.Minute), time.Millisecond, 0, 10, 10)
	rt.read(ids, now, time.Millisecond, 0, 10, 10)
	got := rt.places(2 * time.Second)
	assert.ElementsMatch(t, []int64{10, 70}, got["epoch-0000"])
	assert.Len(t, got, 1)
	assert.Len(t, rt.places(2*time.Minute), 2)
	rt.close(data1)
	assert.Equal(t, []int64{70}, rt.places(2 * time.Minute)["epoch-0000"])
}
