package source

import (
	"context"
	"sync"
	"time"
)

// Slots is a pool of tokens for work done for reads (an object store's requests in flight,
// decompressions at once), handed out in arrival order, to the reads a reader waits for
// before readahead's (Read.Background). Safe for concurrent use.
type Slots struct {
	mu   sync.Mutex
	free int                // tokens nobody holds (guarded by mu)
	wait [2][]chan struct{} // waiters: [0] readers', [1] readahead's (guarded by mu)
}

// NewSlots returns a pool of n tokens.
func NewSlots(n int) *Slots { return &Slots{free: n} }

// Acquire takes a token for a read, waiting for one: a readahead read (how.Background)
// after every reader's, moved among them when promoted while it waits (looked at every
// poll). It returns ctx's error if ctx ends first, and giveUp's if giveUp (nil: never) says
// so first: giveUp is asked every poll while the read waits. Release gives the token back.
func (s *Slots) Acquire(ctx context.Context, how Read, poll time.Duration, giveUp func() error) error {
	q := 0
	if how.Background() {
		q = 1
	}
	s.mu.Lock()
	if s.free > 0 && len(s.wait[0]) == 0 && (q == 0 || len(s.wait[1]) == 0) {
		s.free--
		s.mu.Unlock()
		return nil
	}
	w := make(chan struct{}, 1)
	s.wait[q] = append(s.wait[q], w)
	s.mu.Unlock()
	t := time.NewTimer(poll)
	defer t.Stop()
	for {
		select {
		case <-w:
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

// move puts the waiter w, if it still waits among readahead's requests, last among the
// readers', and reports whether it did.
func (s *Slots) move(w chan struct{}) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.wait[1] {
		if x == w {
			s.wait[1] = append(s.wait[1][:i], s.wait[1][i+1:]...)
			s.wait[0] = append(s.wait[0], w)
			return true
		}
	}
	return false
}

// leave takes the waiter w out of queue q; if a token was handed to it meanwhile, it is
// passed on.
func (s *Slots) leave(q int, w chan struct{}) {
	s.mu.Lock()
	for i, x := range s.wait[q] {
		if x == w {
			s.wait[q] = append(s.wait[q][:i], s.wait[q][i+1:]...)
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	<-w // handed over: give it back
	s.Release()
}

// Release returns a token: to the first reader waiting, else to the first readahead read.
func (s *Slots) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q := range s.wait {
		if len(s.wait[q]) > 0 {
			w := s.wait[q][0]
			s.wait[q] = s.wait[q][1:]
			w <- struct{}{}
			return
		}
	}
	s.free++
}
