package objstore

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/crc32c"
)

func TestReadSum(t *testing.T) {
	data := bytes.Repeat([]byte("blockfs-"), 40000)
	want := crc32c.Checksum(data)
	bufs := func() [][]byte {
		return [][]byte{make([]byte, 100000), make([]byte, 1), make([]byte, len(data)-100001)}
	}
	for name, r := range map[string]func() io.Reader{
		"plain":     func() io.Reader { return bytes.NewReader(data) },
		"one byte":  func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		"data+EOF":  func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
		"half read": func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
	} {
		b := bufs()
		crc, err := readSum(r(), part{n: int64(len(data)), bufs: b}, true)
		require.NoError(t, err, name)
		require.Equal(t, want, crc, name)
		require.Equal(t, data, bytes.Join(b, nil), name)
	}
	// A short body is an error, never a partly filled buffer taken as whole.
	_, err := readSum(bytes.NewReader(data[:len(data)-1]), part{bufs: bufs()}, true)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = readSum(bytes.NewReader(data[:100000]), part{bufs: bufs()}, false)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = readSum(iotest.TimeoutReader(bytes.NewReader(data)), part{bufs: bufs()}, true)
	require.ErrorIs(t, err, iotest.ErrTimeout)
}
