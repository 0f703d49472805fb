// Package background runs a writer's I/O in one goroutine beside the one that produces the
// work, and keeps the first error: layout.Writer writes block files with it while it reads the
// next block, and pack's scatter pass appends to bucket files with it.
//
// The rule for errors is the same for both: the first error is kept (Latch); the producer asks
// for it before it queues more work, and gets it from Stop.
package background

import "sync/atomic"

// Latch keeps the first error set on it. The zero Latch holds none. Safe for concurrent use.
type Latch struct {
	p atomic.Pointer[error]
}

// Set records err unless an error is recorded already.
func (l *Latch) Set(err error) { l.p.CompareAndSwap(nil, &err) }

// Err returns the first error set, or nil.
func (l *Latch) Err() error {
	if p := l.p.Load(); p != nil {
		return *p
	}
	return nil
}

// Worker runs a function on each queued job, in order, in one goroutine, and keeps the first
// error its jobs (or anyone) Set. The zero Worker is stopped. Start, Running, Put and Stop are
// for the one goroutine that produces the jobs; Set and Err are safe from any goroutine. A
// Worker must not be copied.
type Worker[J any] struct {
	Latch
	jobs    chan J        // nil while stopped
	stopped chan struct{} // closed when the goroutine has returned
}

// Start starts the goroutine, which calls do on each job Put until Stop, with a queue of
// queue jobs. It does nothing if the Worker is running.
func (w *Worker[J]) Start(queue int, do func(J)) {
	if w.jobs != nil {
		return
	}
	jobs, stopped := make(chan J, queue), make(chan struct{})
	w.jobs, w.stopped = jobs, stopped
	go func() {
		defer close(stopped)
		for j := range jobs {
			do(j)
		}
	}()
}

// Running reports whether the Worker has been started and not stopped.
func (w *Worker[J]) Running() bool { return w.jobs != nil }

// Put queues j, waiting while the queue is full. The Worker must be running. Put queues even
// after an error: a job may have buffers to give back; do decides what to skip (Err).
func (w *Worker[J]) Put(j J) { w.jobs <- j }

// Stop waits for the queued jobs and the goroutine, and returns the first error. Safe to call
// more than once, and on a Worker never started.
func (w *Worker[J]) Stop() error {
	if w.jobs != nil {
		close(w.jobs)
		<-w.stopped
		w.jobs = nil
	}
	return w.Err()
}
