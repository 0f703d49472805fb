package source

import (
	"context"
	"sync/atomic"
)

// What a caller of Blocks.Fill tells a backend about a read through its context. A backend
// that has no use for a mark ignores it.

type ctxKey int

const (
	backgroundKey ctxKey = iota
	callerChecksKey
)

// background is Background's mark: a read nobody waits for, until a reader does.
type background struct{ waited atomic.Bool }

// Background marks ctx as a read nobody waits for yet (the cache's readahead): a backend with
// a bounded pool of requests serves the reads that are not marked first, so that readahead
// never holds a reader's request slot, and may give such a read up sooner. Promote, safe to
// call at any time and more than once, says that a reader now waits for it: from then on
// IsBackground is false.
func Background(ctx context.Context) (marked context.Context, promote func()) {
	m := &background{}
	return context.WithValue(ctx, backgroundKey, m), func() { m.waited.Store(true) }
}

// IsBackground reports whether ctx is marked by Background and not promoted since.
func IsBackground(ctx context.Context) bool {
	m, _ := ctx.Value(backgroundKey).(*background)
	return m != nil && !m.waited.Load()
}

// CallerChecks marks ctx as a read whose caller checks the whole file against its checksum
// itself (it reads every byte of the file, in parts, and sums them: layout's CheckCRC): a
// backend that would otherwise read and check the whole object for each part may read only
// the part asked for. The caller must not hand out a byte before its own check passes.
func CallerChecks(ctx context.Context) context.Context {
	return context.WithValue(ctx, callerChecksKey, true)
}

// IsCallerChecks reports whether ctx is marked by CallerChecks.
func IsCallerChecks(ctx context.Context) bool {
	v, _ := ctx.Value(callerChecksKey).(bool)
	return v
}
