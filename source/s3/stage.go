package s3

import (
	"context"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/source"
)

// stager holds whole objects fetched and checked for reads that wanted only part of them, so
// the rest of the object is there for the next read (the cache loads a block file in several
// runs when a reader gets ahead of the readahead). Fetches of the same object merge. Buffers
// live outside the Go heap (mmap), like the cache's arena, and are returned when an object has
// been copied out whole or falls out of the budget. Safe for concurrent use.
type stager struct {
	budget int64 // bytes of finished, unused objects kept; immutable

	mu   sync.Mutex
	objs map[string]*staged // fetching and fetched objects (guarded by mu)
	idle []*staged          // fetched objects no read holds, least recent first (guarded by mu)
	held int64              // bytes of idle objects (guarded by mu)
}

// staged is one whole object. buf and err are written before ready is closed and only read
// after it.
type staged struct {
	key   string
	buf   []byte
	ready chan struct{}
	err   error

	// Guarded by stager.mu.
	refs   int
	copied int64 // bytes copied out; the object is dropped once it reaches len(buf)
}

func newStager(budget int64) *stager {
	return &stager{budget: budget, objs: map[string]*staged{}}
}

// read fills bufs from off of object key (identity id, with a checksum), fetching and
// checking the whole object unless it is staged already.
func (st *stager) read(ctx context.Context, b *Blocks, key string, id source.Identity, off int64, bufs [][]byte) error {
	st.mu.Lock()
	o := st.objs[key]
	if o == nil {
		o = &staged{key: key, ready: make(chan struct{})}
		st.objs[key] = o
		o.refs++
		st.mu.Unlock()
		o.err = st.load(ctx, b, key, id, o)
		close(o.ready)
	} else {
		if o.refs == 0 {
			st.unidleLocked(o)
		}
		o.refs++
		st.mu.Unlock()
		select {
		case <-o.ready:
		case <-ctx.Done():
			st.release(o, 0)
			return ctx.Err()
		}
	}
	if o.err != nil {
		st.release(o, 0)
		return o.err
	}
	at := off
	for _, p := range bufs {
		at += int64(copy(p, o.buf[at:]))
	}
	st.release(o, at-off)
	return nil
}

// load fetches the whole object into a new buffer and checks it.
func (st *stager) load(ctx context.Context, b *Blocks, key string, id source.Identity, o *staged) error {
	buf, err := unix.Mmap(-1, 0, int(id.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return &source.Error{Op: "stage", Name: b.s.url(key), Off: -1, Err: err}
	}
	if err := b.fetchChecked(ctx, key, id, [][]byte{buf}); err != nil {
		_ = unix.Munmap(buf)
		return err
	}
	o.buf = buf
	return nil
}

// release drops one reference to o after n bytes were copied out of it. A failed object leaves
// the map at once (errors are not kept: the next read tries again); a finished one becomes
// idle, and idle objects beyond the budget, or copied out whole, are unmapped.
func (st *stager) release(o *staged, n int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	o.refs--
	o.copied += n
	if o.refs > 0 {
		return
	}
	if o.err != nil || o.copied >= int64(len(o.buf)) {
		st.dropLocked(o)
		return
	}
	st.idle = append(st.idle, o)
	st.held += int64(len(o.buf))
	for st.held > st.budget && len(st.idle) > 0 {
		old := st.idle[0]
		st.unidleLocked(old)
		st.dropLocked(old)
	}
}

// unidleLocked takes o out of the idle list. Requires st.mu.
func (st *stager) unidleLocked(o *staged) {
	for i, x := range st.idle {
		if x == o {
			st.idle = append(st.idle[:i], st.idle[i+1:]...)
			st.held -= int64(len(o.buf))
			return
		}
	}
}

// dropLocked forgets o and returns its buffer; no read holds it. Requires st.mu.
func (st *stager) dropLocked(o *staged) {
	if st.objs[o.key] == o {
		delete(st.objs, o.key)
	}
	if o.buf != nil {
		_ = unix.Munmap(o.buf)
		o.buf = nil
	}
}
