package parallel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEachAllAndLimit(t *testing.T) {
	var running, most, calls atomic.Int32
	err := Each(context.Background(), 50, 3, func(ctx context.Context, i int) error {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		calls.Add(1)
		running.Add(-1)
		return nil
	})
	require.NoError(t, err)
	assert.EqualValues(t, 50, calls.Load())
	assert.LessOrEqual(t, most.Load(), int32(3))
}

func TestEachFirstErrorCancels(t *testing.T) {
	bad := errors.New("bad")
	var after atomic.Int32
	err := Each(context.Background(), 100, 1, func(ctx context.Context, i int) error {
		if i == 3 {
			return bad
		}
		if i > 3 {
			after.Add(1)
		}
		return nil
	})
	require.ErrorIs(t, err, bad)
	assert.LessOrEqual(t, after.Load(), int32(1), "calls after the failure are not started (one may race it)")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, Each(ctx, 5, 0, func(context.Context, int) error { return nil }), context.Canceled)
}
