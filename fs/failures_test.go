package fs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/blockfs/blockfs/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFailuresKept(t *testing.T) {
	var f failures
	kinds, last := f.snapshot()
	assert.Len(t, kinds, len(ErrorKinds), "every kind, 0 before any failure")
	assert.Empty(t, last)

	f.add("epoch-0000", 0, "changed", "a file changed")
	f.add("epoch-0000", 4096, "interrupted", "") // counted, not kept
	f.add("epoch-0001", 10, "corrupt", "bad crc")
	f.add("epoch-0000", 8192, "changed", "a file changed") // the same failure again: moves last
	kinds, last = f.snapshot()
	assert.Equal(t, uint64(2), kinds["changed"])
	assert.Equal(t, uint64(1), kinds["interrupted"])
	assert.Equal(t, uint64(1), kinds["corrupt"])
	require.Len(t, last, 2)
	assert.Equal(t, "epoch-0001", last[0].File)
	assert.Equal(t, ErrorStats{File: "epoch-0000", Offset: 8192, Kind: "changed", Reason: "a file changed", Count: 2,
		First: last[1].First, Latest: last[1].Latest}, last[1])

	for i := 0; i < 3*lastErrors; i++ {
		f.add(fmt.Sprintf("epoch-%04d", i), 0, "disk", "I/O error")
	}
	_, last = f.snapshot()
	require.Len(t, last, lastErrors, "bounded")
	assert.Equal(t, fmt.Sprintf("epoch-%04d", 3*lastErrors-1), last[lastErrors-1].File, "the most recent kept, last")

	f.add("x", 0, "other", strings.Repeat("y", 10*maxReason))
	_, last = f.snapshot()
	assert.Len(t, last[lastErrors-1].Reason, maxReason+3, "a reason is bounded")
}

func TestClassifyKinds(t *testing.T) {
	for _, err := range []error{errors.New("x"), fmt.Errorf("y: %w", syscall.EIO), context.Canceled, syscall.ENOENT,
		syscall.EMFILE, syscall.ENOMEM, &layout.Error{Path: "b.bin", Kind: layout.ErrCorrupt, Msg: "truncated"}} {
		errno, kind, _ := classify(err)
		assert.Contains(t, ErrorKinds, kind, "%v", err)
		assert.NotZero(t, errno)
	}
}
