//go:build tables

package pack

import (
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestTableInputFIFORefused: a FIFO where a Parquet or Arrow file was listed is refused at
// once, not waited on.
func TestTableInputFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "x.parquet")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	refusedAtOnce(t, fifo, func() []error {
		_, _, pq := openParquetInput(fifo)
		_, arrow := openArrowFile(fifo, memory.DefaultAllocator)
		return []error{pq, arrow}
	})
}
