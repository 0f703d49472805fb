// Package flight is blockfs's one "fetch once while others wait": a Call is one load that any
// number of goroutines wait for, each giving up on its own context; a Group merges the loads
// of the same key (restic's bloblru.GetOrCompute, x/sync's singleflight).
//
// The page cache and the s3 stager keep loaded things under the same key as loads in progress
// (a page holds its slot while it loads), so they keep their own map and lock and embed a
// Call in each entry; the disk cache, which only needs loads in progress merged, uses a Group.
package flight

import (
	"context"
	"sync"
)

// Call is one load, and once done its result. The loader creates it with New and publishes the
// result once: Finish, or Set then Wake where the owner's own lock must cover the result (the
// owner then reads Err under that lock before Done). Waiters use Done, Wait or, after Done,
// Result. A Call may be embedded by value (New's result is copied in before anyone waits).
type Call[V any] struct {
	done chan struct{}
	val  V
	err  error
}

// New returns a Call in progress.
func New[V any]() Call[V] { return Call[V]{done: make(chan struct{})} }

// Set records the result without waking the waiters. The loader only, once, before Wake.
func (c *Call[V]) Set(v V, err error) { c.val, c.err = v, err }

// Wake wakes the waiters: the result Set is theirs. The loader only, once.
func (c *Call[V]) Wake() { close(c.done) }

// Finish records the result and wakes the waiters (Set, then Wake).
func (c *Call[V]) Finish(v V, err error) {
	c.Set(v, err)
	c.Wake()
}

// Done returns a channel closed when the result is there.
func (c *Call[V]) Done() <-chan struct{} { return c.done }

// Result returns the result. Only after Done is closed (or, for the owner, under the lock it
// held for Set).
func (c *Call[V]) Result() (V, error) { return c.val, c.err }

// Err returns the result's error, as Result does.
func (c *Call[V]) Err() error { return c.err }

// Wait waits for the result and returns it, or ctx's error if ctx ends first (the load goes
// on for the others). A finished Call returns its result whatever ctx says.
func (c *Call[V]) Wait(ctx context.Context) (V, error) {
	select {
	case <-c.done:
		return c.val, c.err
	default:
	}
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// Group merges concurrent loads of the same key: while one is in progress, callers for its key
// wait for it instead of loading again. It keeps no result once a load ends: a caller that
// wants one kept keeps it itself (and looks there first). The zero Group is ready to use. Its
// lock is held only to find or add a load, never across one.
type Group[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*Call[V] // loads in progress (guarded by mu)
}

// Do calls load for k and returns its result, unless a load of k is in progress: then it waits
// for that one and returns its result, or ctx's error if ctx ends first, with shared set.
func (g *Group[K, V]) Do(ctx context.Context, k K, load func() (V, error)) (v V, err error, shared bool) {
	g.mu.Lock()
	if c := g.calls[k]; c != nil {
		g.mu.Unlock()
		v, err = c.Wait(ctx)
		return v, err, true
	}
	if g.calls == nil {
		g.calls = make(map[K]*Call[V])
	}
	c := New[V]()
	g.calls[k] = &c
	g.mu.Unlock()
	v, err = load()
	g.mu.Lock()
	delete(g.calls, k)
	g.mu.Unlock()
	c.Finish(v, err)
	return v, err, false
}
