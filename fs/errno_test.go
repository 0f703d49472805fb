package fs

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/blockfs/blockfs/layout"
)

func TestToErrno(t *testing.T) {
	assert.Equal(t, syscall.Errno(0), toErrno(nil, "x"))
	assert.Equal(t, syscall.Errno(0), toErrno(io.EOF, "x"))
	corrupt := fmt.Errorf("reading: %w", &layout.Error{Path: "b.bin", Block: 3, Kind: layout.ErrCorrupt, Msg: "truncated"})
	assert.Equal(t, syscall.EIO, toErrno(corrupt, "x"))
	assert.Equal(t, syscall.EIO, toErrno(errors.New("anything else"), "x"))
}
