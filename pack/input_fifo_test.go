package pack

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestInputFIFORefused: a FIFO where a shard was listed (put there by anyone who can write
// the folder) is refused at once by each shard format's open, not waited on.
func TestInputFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "x.tar")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	refusedAtOnce(t, fifo, func() []error {
		_, wds := openWdsShard(fifo)
		scan := (&wdsScan{}).shard(fifo)
		tf := (&tfrecordReader{paths: []string{fifo}}).open()
		return []error{wds, scan, tf}
	})
}

// refusedAtOnce runs opens, which must each fail saying path is a FIFO, within 10 s; a FIFO
// waited on is let go by opening it for writing, as often as it takes.
func refusedAtOnce(t *testing.T, path string, opens func() []error) {
	t.Helper()
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		errs = opens()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		for waiting := true; waiting; {
			if w, err := os.OpenFile(path, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				w.Close() // lets an open that waits for a writer go on
			}
			select {
			case <-done:
				waiting = false
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatal("an open waited on the FIFO")
	}
	for i, err := range errs {
		assert.ErrorContains(t, err, "named pipe (FIFO), not a regular file", "open %d", i)
	}
}
