package stack

import "sync"

// bufList keeps the buffers a FramesSource decompresses with (its spans, its scratches) from
// one use to the next, so that once they are made a steady read allocates nothing: the
// buffers in use and kept together take at most keep bytes (the most its semaphores let be in
// use at once), a buffer that would pass it being left to the collector. A get that no kept
// buffer serves drops the kept ones first (smallest first) until the new one fits beside the
// rest, so that the kept sizes follow the reads. A sync.Pool, which the collector empties, had
// 64 MiB buffers made again and again: garbage the daemon's RSS carried past its bound between
// collections. Safe for concurrent use.
type bufList struct {
	mu   sync.Mutex
	keep int64     // the most bytes of buffers in use and kept
	held int64     // bytes of the buffers in free
	out  int64     // bytes of the buffers handed out by get and not yet put back
	free []*[]byte // buffers nobody uses
}

// get returns a buffer of at least size bytes: the smallest kept one that serves, else a new
// one.
func (l *bufList) get(size int64) *[]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
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
		l.out += int64(cap(*b))
		*b = (*b)[:cap(*b)]
		return b
	}
	for len(l.free) > 0 && l.held+l.out+size > l.keep {
		l.dropSmallest()
	}
	b := make([]byte, size)
	l.out += size
	return &b
}

// put gives b back: kept while the buffers in use and kept stay within keep bytes.
func (l *bufList) put(b *[]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := int64(cap(*b))
	l.out -= n
	if l.held+l.out+n <= l.keep {
		l.free = append(l.free, b)
		l.held += n
	}
}

// dropSmallest leaves the smallest kept buffer to the collector. l.mu is held.
func (l *bufList) dropSmallest() {
	k := 0
	for i, b := range l.free {
		if cap(*b) < cap(*l.free[k]) {
			k = i
		}
	}
	l.held -= int64(cap(*l.free[k]))
	l.free = append(l.free[:k], l.free[k+1:]...)
}
