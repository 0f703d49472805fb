// Package parallel runs a few calls at once and stops at the first failure: the one way
// blockfs does it (an object's parts fetched with ranged GETs, a field's runs of values read
// from a shard).
package parallel

import (
	"context"
	"sync"
)

// Each calls fn(ctx, i) for i in [0, n), at most limit at once (limit <= 0: all at once), each
// on a goroutine of its own, with a context that the first error cancels; it waits for every
// call it started and returns that first error, or ctx's if it ended before all were started.
func Each(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	if limit <= 0 || limit > n {
		limit = n
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		sem   = make(chan struct{}, limit)
	)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
