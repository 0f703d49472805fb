package objstore

import (
	"errors"
	"net/http"
	"sync/atomic"
)

// counters are a Store's request counters (Counters).
type counters struct {
	requests atomic.Uint64
	retries  atomic.Uint64
	errs     [numErrKinds]atomic.Uint64
}

// The kinds of failed requests, as Counters names them.
const (
	errThrottled = iota // 429, 503 SlowDown
	errServer           // other 5xx
	errTimedOut         // no answer in time, or no progress
	errNetwork          // no HTTP answer: refused, reset
	errClient           // 4xx: not found, denied, a bad range
	errOther
	numErrKinds
)

var errKindNames = [numErrKinds]string{"throttled", "server", "timeout", "network", "client", "other"}

// Counters are what stats.json's "store" and the metrics say of an object store.
type Counters struct {
	Requests uint64            `json:"requests"` // tries of requests, retries included
	Retries  uint64            `json:"retries"`  // tries after a failed one
	Errors   map[string]uint64 `json:"errors"`   // failed tries, by kind
}

// Counters returns the store's request counters now.
func (s *Store) Counters() Counters {
	c := Counters{Requests: s.ctr.requests.Load(), Retries: s.ctr.retries.Load(), Errors: make(map[string]uint64, numErrKinds)}
	for k := range numErrKinds {
		c.Errors[errKindNames[k]] = s.ctr.errs[k].Load()
	}
	return c
}

// Counters returns its store's request counters.
func (b *Blocks) Counters() Counters { return b.s.Counters() }

// failed counts a failed try by kind (a: what its error says).
func (c *counters) failed(err error, a Answer) {
	k := errOther
	if a.Kind == NotFound {
		return // an answer (the object is not there), not a failure: an existence check
	}
	code := a.Status
	switch {
	case errors.Is(err, errTimeout):
		k = errTimedOut
	case a.Kind == Throttled || code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		k = errThrottled
	case code >= 500:
		k = errServer
	case code >= 400:
		k = errClient
	case code == 0:
		k = errNetwork
	}
	c.errs[k].Add(1)
}
