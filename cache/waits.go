package cache

import (
	"context"
	"sync/atomic"
	"time"
)

// Waits counts the time a read spent waiting for pages to load (from the disk, the object
// store): the read's share of the data stall. A reader puts one in its context with
// WithWaits; every wait of the cache under that context adds to it. Safe for concurrent use.
type Waits struct{ ns atomic.Int64 }

type waitsKey struct{}

// WithWaits returns ctx carrying w.
func WithWaits(ctx context.Context, w *Waits) context.Context {
	return context.WithValue(ctx, waitsKey{}, w)
}

// Duration returns the time waited so far.
func (w *Waits) Duration() time.Duration { return time.Duration(w.ns.Load()) }

// waited adds the time since start to ctx's Waits, if it has one.
func waited(ctx context.Context, start time.Time) {
	if w, ok := ctx.Value(waitsKey{}).(*Waits); ok {
		w.ns.Add(int64(time.Since(start)))
	}
}
