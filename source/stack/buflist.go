package stack

import "sync"

// bufList keeps the buffers a FramesSource decompresses with (its spans, its scratches) from
// one use to the next, up to keep bytes: the most its semaphores let be in use at once, so that
// once they are made a steady read allocates nothing. A sync.Pool, which the collector empties,
// had 64 MiB buffers made again and again: garbage the daemon's RSS carried past its bound
// between collections. Safe for concurrent use.
type bufList struct {
	mu   sync.Mutex
	keep int64     // the most bytes of buffers kept
	held int64     // bytes of buffers in free
	free []*[]byte // buffers nobody uses
}

// get returns a buffer of at least size bytes: the smallest kept one that serves, else a new
// one.
func (l *bufList) get(size int64) *[]byte {
	l.mu.Lock()
	best := -1
	for i, b := range l.free {
		if int64(cap(*b)) >= size && (best < 0 || cap(*b) < cap(*l.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := l.free[best]
		l.free = append(l.free[:best], l.free[best+1:]...)
		l.held -= int64(cap(*b))
		l.mu.Unlock()
		*b = (*b)[:cap(*b)]
		return b
	}
	l.mu.Unlock()
	b := make([]byte, size)
	return &b
}

// put gives b back: kept if it fits within keep bytes with the others, else (a span larger
// than any the bound plans for) left to the collector.
func (l *bufList) put(b *[]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := int64(cap(*b)); l.held+n <= l.keep {
		l.free = append(l.free, b)
		l.held += n
	}
}
