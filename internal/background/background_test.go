package background

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLatchKeepsFirst(t *testing.T) {
	var l Latch
	require.NoError(t, l.Err())
	first := errors.New("first")
	l.Set(first)
	l.Set(errors.New("second"))
	require.Equal(t, first, l.Err())
}

func TestWorker(t *testing.T) {
	var w Worker[int]
	require.NoError(t, w.Stop(), "a Worker never started stops at once")
	var got []int
	bad := errors.New("bad")
	w.Start(2, func(j int) {
		got = append(got, j)
		if j == 3 {
			w.Set(bad)
		}
	})
	require.True(t, w.Running())
	for j := range 6 {
		w.Put(j)
	}
	require.ErrorIs(t, w.Stop(), bad)
	require.False(t, w.Running())
	require.ErrorIs(t, w.Stop(), bad, "safe to call twice")
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, got, "every job runs, in order, after an error too")
}
