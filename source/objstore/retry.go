package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/blockfs/blockfs/source"
)

// How a request fails in bounded time (docs/RELIABILITY.md, "Never a hang"):
//
//   - each try has the time limit Options.Timeout (a slow transfer) and fails sooner when it
//     makes no progress for Options.StallTimeout (no connection, no answer, no byte of the
//     body: a store that hangs);
//   - a failed try is retried Options.Retries times with backoff, holding a slot of the
//     store's pool (slots) only while it runs; reads a reader waits for get slots before
//     readahead's (source.Read.Ahead, until promoted);
//   - the store's health remembers since when it has answered nothing. Once the store has been
//     silent for the silence budget, (Retries+1) x StallTimeout, a request gives up after its
//     next try, and a readahead request at once, queued or not. A reader's request always
//     makes one try, which finds the store again when it is back. So a read against a store
//     that stopped answering fails within about the budget, the backoff and one try (the
//     kernel's second try of a failed readahead page), however many requests are queued, and
//     a read after that within one try and a wait for a slot.

// clockBase is the origin of the store's clock: nanoseconds on the monotonic clock.
var clockBase = time.Now()

// now returns the store's clock.
func now() int64 { return int64(time.Since(clockBase)) }

// health is what the store's answers say: when it last answered (any response, or a byte of a
// body) and since when it has answered nothing though asked. Safe for concurrent use.
type health struct {
	heard  atomic.Int64 // clock of the last answer; 0: none yet
	silent atomic.Int64 // start of the earliest try unanswered since then; void unless > heard
}

// hear records an answer from the store.
func (h *health) hear() { h.heard.Store(now()) }

// unanswered records a try started at start that ended with no answer.
func (h *health) unanswered(start int64) {
	for {
		if h.heard.Load() >= start {
			return // the store answered something since: not silent
		}
		ss := h.silent.Load()
		if ss > h.heard.Load() && ss <= start {
			return // silent since earlier already
		}
		if h.silent.CompareAndSwap(ss, start) {
			return
		}
	}
}

// silentFor returns how long the store has answered nothing though asked (0: it answers).
func (h *health) silentFor() time.Duration {
	ss := h.silent.Load()
	if ss == 0 || ss <= h.heard.Load() {
		return 0
	}
	return time.Duration(now() - ss)
}

// attempt is one try of a request: its context ends when the try has run for its time limit
// or has made no progress for the stall timeout; progress says it made some.
type attempt struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stopT  context.CancelFunc
	h      *health
	stall  time.Duration
	last   atomic.Int64 // clock of the last progress
	timer  *time.Timer  // the stall watchdog; nil without a stall timeout
	ended  atomic.Bool  // the try is over: the watchdog stops
}

var (
	errTimeout = errors.New("request timed out")
	errStalled = errors.New("stalled")
	errLimit   = errors.New("over the time limit")
)

// newAttempt starts a try under parent with the time limit limit and the stall timeout stall
// (0: none).
func newAttempt(parent context.Context, h *health, limit, stall time.Duration) *attempt {
	a := &attempt{h: h, stall: stall}
	ctx, stopT := parent, context.CancelFunc(func() {})
	if limit > 0 {
		ctx, stopT = context.WithTimeoutCause(parent, limit, errLimit)
	}
	a.ctx, a.cancel = context.WithCancelCause(ctx)
	a.stopT = stopT
	a.last.Store(now())
	if stall > 0 {
		a.timer = time.AfterFunc(time.Hour, a.check) // set before it can fire
		a.timer.Reset(stall)
	}
	return a
}

// progress records that the try got something from the store: its answer, or bytes.
func (a *attempt) progress() {
	a.last.Store(now())
	a.h.hear()
}

// check is the watchdog: it ends the try if it has made no progress for the stall timeout,
// and otherwise looks again when it would have.
func (a *attempt) check() {
	if a.ended.Load() {
		return
	}
	idle := time.Duration(now() - a.last.Load())
	if idle >= a.stall {
		a.cancel(errStalled)
		return
	}
	a.timer.Reset(a.stall - idle)
}

// end stops the watchdog and releases the try's context. It returns why the try's context
// ended, if it did on its own (stalled, or over its limit): nil otherwise.
func (a *attempt) end(parent context.Context) error {
	var why error
	if a.ctx.Err() != nil && parent.Err() == nil {
		why = context.Cause(a.ctx)
	}
	a.ended.Store(true)
	if a.timer != nil {
		a.timer.Stop()
	}
	a.cancel(nil)
	a.stopT()
	return why
}

// retry runs fn until it succeeds, fails in a way a retry cannot mend, Retries retries have
// failed, or the store has been silent for the budget; fn calls progress whenever the store
// answers or sends bytes. Each try holds a slot of the pool (waiting for one does not count)
// and has Timeout to finish, and StallTimeout between signs of progress.
func (s *Store) retry(ctx context.Context, fn func(ctx context.Context, progress func()) error) error {
	return s.retryRead(ctx, source.Read{}, fn)
}

// retryRead is retry for a read of a dataset's bytes served as how says: a readahead's waits
// for a slot after the readers' and gives up on a silent store without a try.
func (s *Store) retryRead(ctx context.Context, how source.Read, fn func(ctx context.Context, progress func()) error) error {
	return s.retryFor(ctx, how, s.opt.Timeout, s.opt.StallTimeout, fn)
}

// silenceBudget is how long the store may answer nothing before a request gives up: the time
// its tries would take to stall out.
func (s *Store) silenceBudget() time.Duration {
	return time.Duration(s.opt.Retries+1) * s.opt.StallTimeout
}

// errSilent: the store has answered nothing for the silence budget.
func (s *Store) errSilent() error {
	return fmt.Errorf("the store has answered nothing for %v: %w", s.h.silentFor().Round(100*time.Millisecond), errTimeout)
}

// retryFor is retry with a time limit of limit and a stall timeout of stall per try (0: none,
// and no silence budget either: uploads).
func (s *Store) retryFor(ctx context.Context, how source.Read, limit, stall time.Duration, fn func(ctx context.Context, progress func()) error) error {
	budget := s.silenceBudget()
	silent := func() error {
		if stall > 0 && s.h.silentFor() >= budget {
			return s.errSilent()
		}
		return nil
	}
	// A readahead request gives up on a silent store without a try, queued or not.
	bgSilent := func() error {
		if !how.Background() {
			return nil
		}
		if err := silent(); err != nil {
			return fmt.Errorf("%w: %w", source.ErrNotTried, err)
		}
		return nil
	}
	poll := min(stall, time.Second) // how often a request waiting for a slot looks again
	if poll <= 0 {
		poll = time.Hour
	}
	wait := s.opt.Backoff
	if err := bgSilent(); err != nil {
		return err
	}
	for try := 0; ; try++ {
		if err := s.slots.Acquire(ctx, how, poll, bgSilent); err != nil {
			return err
		}
		start := now()
		a := newAttempt(ctx, &s.h, limit, stall)
		err := fn(a.ctx, a.progress)
		why := a.end(ctx)
		s.slots.Release()
		if cannot(err) {
			return err // what the store cannot do: no request was made, nothing heard
		}
		s.ctr.requests.Add(1)
		if try > 0 {
			s.ctr.retries.Add(1)
		}
		if err == nil {
			s.h.hear()
			return nil
		}
		switch {
		case s.cl.Answer(err).Status != 0:
			s.h.hear() // an answer, if not the one wanted: the store is there
		case ctx.Err() == nil:
			s.h.unanswered(start)
		}
		switch why {
		case errStalled:
			err = fmt.Errorf("no progress for %v: %w", stall, errTimeout)
		case errLimit:
			err = fmt.Errorf("not done within %v: %w", limit, errTimeout)
		}
		if ctx.Err() == nil {
			s.ctr.failed(err, s.cl.Answer(err))
		}
		if ctx.Err() != nil || try >= s.opt.Retries || !retryable(err, s.cl.Answer(err)) {
			return err
		}
		if silent() != nil {
			return fmt.Errorf("%w; the store has answered nothing for %v", err, s.h.silentFor().Round(100*time.Millisecond))
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}

// retryable reports whether a failed request may succeed when tried again (a is what its
// error says): server errors, throttling and anything that is not an answer (a reset, a
// refused connection, a timeout, a stall, a truncated body). A missing object, a changed
// version, a bad range or a refusal are final, and so is what the store cannot do.
func retryable(err error, a Answer) bool {
	if cannot(err) {
		return false
	}
	switch {
	case a.Kind == Throttled || a.Kind == Transient:
		return true
	case a.Status == 0:
		return a.Kind == Other // no answer from the store
	}
	return a.Status >= 500 || a.Status == http.StatusTooManyRequests || a.Status == http.StatusRequestTimeout
}

// cannot reports whether err is what the store cannot do (list, take writes, take an object
// of this size): no request made, nothing a retry mends.
func cannot(err error) bool {
	return errors.Is(err, ErrNoListing) || errors.Is(err, ErrReadOnly) || errors.Is(err, ErrTooLarge)
}
