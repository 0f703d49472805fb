package crc32c

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	cuts := []int{0, 1, 2, 3, 7, 8, 9, 4095, 4096, 65537, len(data) / 2, len(data) - 1, len(data)}
	for range 20 {
		cuts = append(cuts, r.IntN(len(data)+1))
	}
	whole := Checksum(data)
	for _, k := range cuts {
		a, b := Checksum(data[:k]), Checksum(data[k:])
		require.Equal(t, whole, Combine(a, b, int64(len(data)-k)), "cut at %d", k)
	}
	// Several parts in order, as a ranged fetch combines them.
	var crc uint32
	for at := 0; at < len(data); at += 300000 {
		p := data[at:min(at+300000, len(data))]
		crc = Combine(crc, Checksum(p), int64(len(p)))
	}
	require.Equal(t, whole, crc)
}

func TestCheckValue(t *testing.T) {
	require.Equal(t, uint32(0xe3069283), Checksum([]byte("123456789"))) // the CRC32C check value
}
