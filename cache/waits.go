package cache

import (
	"context"
	"sync/atomic"
	"time"
)

// Waits counts the time a read spent waiting for pages to load (from the disk, the object
// store): the read's share of the data stall. A reader passes one to the cache's reads (Fill,
// Pin and its kin); every wait of theirs adds to it. Safe for concurrent use; a nil *Waits
// counts nothing.
type Waits struct{ ns atomic.Int64 }

// Duration returns the time waited so far.
func (w *Waits) Duration() time.Duration { return time.Duration(w.ns.Load()) }

// add adds the time since start to w, unless w is nil.
func (w *Waits) add(start time.Time) {
	if w != nil {
		w.ns.Add(int64(time.Since(start)))
	}
}

// waitAll waits until every entry has loaded, and returns the first load error, or ctx's error
// if it ends first (the entries stay pinned: the caller unpins them as usual).
// The time spent waiting goes to w (nil: not counted).
func waitAll(ctx context.Context, w *Waits, ents []*entry) error {
	var start time.Time
	for _, e := range ents {
		select {
		case <-e.load.Done():
			continue
		default:
		}
		if start.IsZero() {
			start = time.Now()
		}
		select {
		case <-e.load.Done():
		case <-ctx.Done():
			w.add(start)
			return ctx.Err()
		}
	}
	if !start.IsZero() {
		w.add(start)
	}
	for _, e := range ents {
		if err := e.load.Err(); err != nil {
			return err
		}
	}
	return nil
}
