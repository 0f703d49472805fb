package source

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Slots is a pool of tokens for work done for reads (an object store's requests in flight,
// decompressions at once, bytes of compressed frames held), handed out in arrival order, to
// the reads a reader waits for before readahead's (Read.Background): a readahead read waits
// while any reader's does, and a reader's read never waits behind a readahead's. Within each
// class the first waiter is served first, however many tokens it asks for, so that a large
// request is not starved by small ones. Safe for concurrent use.
type Slots struct {
	mu   sync.Mutex
	size int64       // tokens in all
	free int64       // tokens nobody holds (guarded by mu)
	wait [2][]*taker // waiters: [0] readers', [1] readahead's (guarded by mu)
}

// taker is a read waiting for n tokens; ready is signalled once they are its.
type taker struct {
	n     int64
	ready chan struct{}
}

// NewSlots returns a pool of n tokens.
func NewSlots(n int) *Slots { return NewWeighted(int64(n)) }

// NewWeighted returns a pool of n tokens that reads take several at a time (AcquireN): bytes.
func NewWeighted(n int64) *Slots { return &Slots{size: n, free: n} }

// Acquire takes a token for a read: AcquireN of one.
func (s *Slots) Acquire(ctx context.Context, how Read, poll time.Duration, giveUp func() error) error {
	return s.AcquireN(ctx, how, 1, poll, giveUp)
}

// Release gives back a token taken by Acquire.
func (s *Slots) Release() { s.ReleaseN(1) }

// AcquireN takes n tokens for a read, waiting for them: a readahead read (how.Background)
// after every reader's, moved among them when promoted while it waits (looked at every
// poll). It returns ctx's error if ctx ends first, and giveUp's if giveUp (nil: never) says
// so first: giveUp is asked every poll while the read waits. A read of more tokens than the
// pool has is refused at once. ReleaseN gives them back.
func (s *Slots) AcquireN(ctx context.Context, how Read, n int64, poll time.Duration, giveUp func() error) error {
	if n > s.size || n < 0 {
		return fmt.Errorf("a read asked for %d of a pool of %d", n, s.size)
	}
	q := 0
	if how.Background() {
		q = 1
	}
	s.mu.Lock()
	if s.free >= n && len(s.wait[0]) == 0 && (q == 0 || len(s.wait[1]) == 0) {
		s.free -= n
		s.mu.Unlock()
		return nil
	}
	w := &taker{n: n, ready: make(chan struct{}, 1)}
	s.wait[q] = append(s.wait[q], w)
	s.mu.Unlock()
	t := time.NewTimer(poll)
	defer t.Stop()
	for {
		select {
		case <-w.ready:
			return nil
		case <-ctx.Done():
			s.leave(q, w)
			return ctx.Err()
		case <-t.C:
			if giveUp != nil {
				if err := giveUp(); err != nil {
					s.leave(q, w)
					return err
				}
			}
			if q == 1 && !how.Background() && s.move(w) {
				q = 0
			}
			t.Reset(poll)
		}
	}
}

// ReleaseN gives back n tokens: to the first readers waiting that they serve, else to the
// first readahead reads.
func (s *Slots) ReleaseN(n int64) {
	s.mu.Lock()
	s.free += n
	s.grant()
	s.mu.Unlock()
}

// grant hands free tokens to the waiters, readers' first, each class in arrival order,
// stopping at the first waiter they do not serve. s.mu is held.
func (s *Slots) grant() {
	for q := range s.wait {
		for len(s.wait[q]) > 0 {
			w := s.wait[q][0]
			if w.n > s.free {
				return
			}
			s.free -= w.n
			s.wait[q] = s.wait[q][1:]
			w.ready <- struct{}{}
		}
	}
}

// move puts the waiter w, if it still waits among readahead's requests, last among the
// readers', and reports whether it did.
func (s *Slots) move(w *taker) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.remove(1, w) {
		return false
	}
	s.wait[0] = append(s.wait[0], w)
	s.grant()
	return true
}

// leave takes the waiter w out of queue q; if the tokens were handed to it meanwhile, they
// are passed on.
func (s *Slots) leave(q int, w *taker) {
	s.mu.Lock()
	if s.remove(q, w) {
		s.grant() // the waiters it held up may now go
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	<-w.ready // handed over: give them back
	s.ReleaseN(w.n)
}

// remove takes w out of queue q, reporting whether it was there. s.mu is held.
func (s *Slots) remove(q int, w *taker) bool {
	for i, x := range s.wait[q] {
		if x == w {
			s.wait[q] = append(s.wait[q][:i], s.wait[q][i+1:]...)
			return true
		}
	}
	return false
}
