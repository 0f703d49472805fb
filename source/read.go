package source

import "sync/atomic"

// Read says how a read is to be served, besides which bytes: whether a reader waits for it and
// who checks its bytes against the dataset's checksum. It is a parameter of every Fill, so a
// layer between the cache and a backend (a disk cache, a mixture's Mux, a sub-dataset) passes
// it on or says why not. The zero Read is a reader's read whose bytes the backend checks. A
// backend that has no use for a field ignores it.
type Read struct {
	// Ahead, when not nil, marks a read nobody waits for yet (the cache's readahead): a backend
	// with a bounded pool of requests serves the reads that are not marked first, so that
	// readahead never holds a reader's request slot, and may give such a read up sooner. Once
	// a reader waits for it (Ahead.Promote), it is served as a reader's.
	Ahead *Ahead
	// CallerChecks: the caller checks the whole file against its checksum itself (it reads
	// every byte of the file, in parts, and sums them: layout's CheckCRC), so a backend that
	// would otherwise read and check the whole object for each part may read only the part
	// asked for. The caller must not hand out a byte before its own check passes.
	CallerChecks bool
}

// Ahead is the standing of a readahead's read (Read.Ahead): in the background until a reader
// waits for it. Safe for concurrent use.
type Ahead struct{ waited atomic.Bool }

// Promote says that a reader now waits for the read: from then on Background is false. Safe
// to call at any time and more than once.
func (a *Ahead) Promote() { a.waited.Store(true) }

// Background reports whether r is a read nobody waits for: marked Ahead and not promoted since.
func (r Read) Background() bool { return r.Ahead != nil && !r.Ahead.waited.Load() }

// Checked returns r with CallerChecks set: a read whose caller checks the whole file itself.
func (r Read) Checked() Read {
	r.CallerChecks = true
	return r
}
