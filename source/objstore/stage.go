package objstore

import (
	"context"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/flight"
	"github.com/blockfs/blockfs/source"
)

// stager holds whole objects fetched and checked for reads that wanted only part of them, so
// the rest of the object is there for the next read (a reader that reads a block file in 1 MiB
// pieces: the disk cache's fetch, verify). Fetches of the same object merge. Buffers live
// outside the Go heap (mmap), like the cache's arena, and are returned when an object has been
// copied out whole or falls out of the budget. The budget bounds every object staged, fetching,
// read or kept: a read that would pass it is not staged (Blocks streams it instead). Safe for
// concurrent use.
type stager struct {
	budget int64 // bytes of objects staged at once; immutable

	mu   sync.Mutex
	objs map[string]*staged // fetching and fetched objects (guarded by mu)
	idle []*staged          // fetched objects no read holds, least recent first (guarded by mu)
	used int64              // bytes of the objects in objs (guarded by mu)
}

// staged is one whole object: its fetch, whose result is the object's buffer (read after the
// fetch is done; a fetch holds a reference until then, so an object nobody holds is done).
type staged struct {
	key   string
	size  int64         // immutable
	ahead *source.Ahead // the fetch's standing when readahead began it (nil: a reader's); immutable
	fetch flight.Call[[]byte]

	// Guarded by stager.mu.
	refs   int
	copied int64 // bytes copied out; the object is dropped once it reaches size
}

func newStager(budget int64) *stager {
	return &stager{budget: budget, objs: map[string]*staged{}}
}

// read fills bufs from off of object key (identity id, with a checksum), fetching and
// checking the whole object unless it is staged already. It reports false, having done
// nothing, when the object does not fit in the budget now.
func (st *stager) read(ctx context.Context, how source.Read, b *Blocks, key string, id source.Identity, off int64, bufs [][]byte) (bool, error) {
	st.mu.Lock()
	o := st.objs[key]
	switch {
	case o != nil:
		if o.refs == 0 {
			st.unidleLocked(o)
		}
		o.refs++
		st.mu.Unlock()
		if o.ahead != nil && !how.Background() {
			// A reader waits for readahead's fetch: it is served as a reader's from now on (a
			// reader's turn for a slot, no giving up on a store counted silent).
			o.ahead.Promote()
		}
	case !st.roomLocked(id.Size):
		st.mu.Unlock()
		return false, nil
	default:
		o = &staged{key: key, size: id.Size, ahead: how.Ahead, fetch: flight.New[[]byte](), refs: 1}
		st.objs[key] = o
		st.used += o.size
		st.mu.Unlock()
		o.fetch.Finish(st.load(ctx, how, b, key, id))
	}
	buf, err := o.fetch.Wait(ctx) // the fetch's error, or ctx's: this read gave up
	if err != nil {
		st.release(o, 0)
		return true, err
	}
	at := off
	for _, p := range bufs {
		at += int64(copy(p, buf[at:]))
	}
	st.release(o, at-off)
	return true, nil
}

// roomLocked makes room for n more bytes, dropping idle objects least recent first, and
// reports whether there is. Requires st.mu.
func (st *stager) roomLocked(n int64) bool {
	for st.used+n > st.budget && len(st.idle) > 0 {
		old := st.idle[0]
		st.idle = st.idle[1:]
		st.dropLocked(old)
	}
	return st.used+n <= st.budget
}

// load fetches the whole object into a new buffer and checks it.
func (st *stager) load(ctx context.Context, how source.Read, b *Blocks, key string, id source.Identity) ([]byte, error) {
	buf, err := unix.Mmap(-1, 0, int(id.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, &source.Error{Op: "stage", Name: b.s.url(key), Off: -1, Err: err}
	}
	if err := b.fetchChecked(ctx, how, key, id, 0, [][]byte{buf}); err != nil {
		_ = unix.Munmap(buf)
		return nil, err
	}
	return buf, nil
}

// release drops one reference to o after n bytes were copied out of it. A failed object leaves
// at once (errors are not kept: the next read tries again); a finished one becomes idle, kept
// until copied out whole or until another object needs its room.
func (st *stager) release(o *staged, n int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	o.refs--
	o.copied += n
	if o.refs > 0 {
		return
	}
	if o.fetch.Err() != nil || o.copied >= o.size {
		st.dropLocked(o)
		return
	}
	st.idle = append(st.idle, o)
}

// unidleLocked takes o out of the idle list. Requires st.mu.
func (st *stager) unidleLocked(o *staged) {
	for i, x := range st.idle {
		if x == o {
			st.idle = append(st.idle[:i], st.idle[i+1:]...)
			return
		}
	}
}

// dropLocked forgets o and returns its buffer; no read holds it. Requires st.mu.
func (st *stager) dropLocked(o *staged) {
	if st.objs[o.key] == o {
		delete(st.objs, o.key)
		st.used -= o.size
	}
	if buf, _ := o.fetch.Result(); buf != nil {
		_ = unix.Munmap(buf)
	}
}
