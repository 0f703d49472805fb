package s3

import (
	"bytes"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

func TestCRC32CCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	cuts := []int{0, 1, 2, 3, 7, 8, 9, 4095, 4096, 65537, len(data) / 2, len(data) - 1, len(data)}
	for range 20 {
		cuts = append(cuts, r.IntN(len(data)+1))
	}
	whole := crc32.Checksum(data, castagnoli)
	for _, k := range cuts {
		a, b := crc32.Checksum(data[:k], castagnoli), crc32.Checksum(data[k:], castagnoli)
		require.Equal(t, whole, crc32cCombine(a, b, int64(len(data)-k)), "cut at %d", k)
	}
	// Several parts in order, as fetch combines them.
	var crc uint32
	for at := 0; at < len(data); at += 300000 {
		p := data[at:min(at+300000, len(data))]
		crc = crc32cCombine(crc, crc32.Checksum(p, castagnoli), int64(len(p)))
	}
	require.Equal(t, whole, crc)
}

func TestReadSum(t *testing.T) {
	data := bytes.Repeat([]byte("blockfs-"), 40000)
	want := crc32.Checksum(data, castagnoli)
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
		crc, err := readSum(r(), b, true)
		require.NoError(t, err, name)
		require.Equal(t, want, crc, name)
		require.Equal(t, data, bytes.Join(b, nil), name)
	}
	// A short body is an error, never a partly filled buffer taken as whole.
	_, err := readSum(bytes.NewReader(data[:len(data)-1]), bufs(), true)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = readSum(bytes.NewReader(data[:100000]), bufs(), false)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = readSum(iotest.TimeoutReader(bytes.NewReader(data)), bufs(), true)
	require.ErrorIs(t, err, iotest.ErrTimeout)
}
