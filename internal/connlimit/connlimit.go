// Package connlimit caps the connections an http.Server holds open, so that clients cannot
// take the descriptors the rest of the process needs. The daemon's --metrics server uses it:
// without a cap, any local user could open connections until the daemon had no descriptor
// left to open a block file with, and every read of the mount failed (EMFILE).
//
// A connection past the cap is never queued: the listener accepts it and, to make room,
// closes the oldest connection that is not serving a request (one that is idle between
// requests, or has sent none yet). When every connection is serving a request, it closes the
// new one at once. So the process holds at most Max connections plus the one being accepted,
// a client that sends its request at once is served even while others sit idle, and a
// request in progress is never cut by a newcomer (the server's timeouts bound those).
//
// Lock order: Listener.mu only; no call out is made while it is held but net.Conn.Close of a
// connection being dropped, which does not block.
package connlimit

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Listener wraps a net.Listener, holding at most Max accepted connections open. Give its
// ConnState to the http.Server that serves it, so it knows which connections are busy.
type Listener struct {
	net.Listener
	max int // immutable after New

	mu   sync.Mutex
	seq  uint64           // guarded by mu: numbers connections in the order they came
	open map[*conn]uint64 // guarded by mu: open connections, by seq
	busy map[*conn]bool   // guarded by mu: those serving a request (http.StateActive)

	dropped atomic.Uint64 // connections closed to stay within max
}

// New returns l capped at n (at least 1) open connections.
func New(l net.Listener, n int) *Listener {
	return &Listener{Listener: l, max: max(1, n), open: map[*conn]uint64{}, busy: map[*conn]bool{}}
}

// Max returns the cap.
func (l *Listener) Max() int { return l.max }

// Dropped returns how many connections were closed to stay within the cap.
func (l *Listener) Dropped() uint64 { return l.dropped.Load() }

// Open returns how many connections are open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// Accept returns the next connection, having closed one (the oldest not serving a request,
// or failing that the new one) when the cap is reached.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: nc, l: l}
		l.mu.Lock()
		var victim *conn
		if len(l.open) >= l.max {
			victim = l.oldestIdleLocked()
			if victim == nil {
				l.mu.Unlock()
				l.dropped.Add(1)
				nc.Close()
				continue
			}
			l.forgetLocked(victim)
		}
		l.seq++
		l.open[c] = l.seq
		l.mu.Unlock()
		if victim != nil {
			l.dropped.Add(1)
			victim.Conn.Close() // its server goroutine sees the error and closes its wrapper
		}
		return c, nil
	}
}

// oldestIdleLocked returns the open connection that came first among those not serving a
// request, or nil when all are; l.mu must be held.
func (l *Listener) oldestIdleLocked() *conn {
	var best *conn
	var bestSeq uint64
	for c, s := range l.open {
		if !l.busy[c] && (best == nil || s < bestSeq) {
			best, bestSeq = c, s
		}
	}
	return best
}

// forgetLocked stops counting c; l.mu must be held.
func (l *Listener) forgetLocked(c *conn) {
	delete(l.open, c)
	delete(l.busy, c)
}

// ConnState is http.Server.ConnState: it tells the listener which connections serve a request.
func (l *Listener) ConnState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.open[c]; !open {
		return // already closed to make room
	}
	switch s {
	case http.StateActive:
		l.busy[c] = true
	case http.StateIdle, http.StateNew:
		delete(l.busy, c)
	case http.StateClosed, http.StateHijacked:
		l.forgetLocked(c)
	}
}

// conn is an accepted connection, counted until it is closed.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

// Close closes the connection and stops counting it.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.forgetLocked(c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
