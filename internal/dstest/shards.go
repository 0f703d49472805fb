package dstest

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TFRecordMask is a TFRecord's masked CRC32C of p, by hand with hash/crc32 (not blockfs's
// internal/crc32c, which the reader sums with).
func TFRecordMask(p []byte) uint32 {
	c := crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli))
	return (c>>15 | c<<17) + 0xa282ead8
}

// TFRecord returns records framed as a TFRecord file, as tf.io.TFRecordWriter writes one: each
// record's length, its masked CRC32C, the data and its masked CRC32C. pack's
// TestTFRecordPythonAndGoWritersAgree holds it to an independent writer in Python.
func TFRecord(records [][]byte) []byte {
	var out []byte
	for _, r := range records {
		length := binary.LittleEndian.AppendUint64(nil, uint64(len(r)))
		out = append(out, length...)
		out = binary.LittleEndian.AppendUint32(out, TFRecordMask(length))
		out = append(out, r...)
		out = binary.LittleEndian.AppendUint32(out, TFRecordMask(r))
	}
	return out
}

// TarMember is a member of a tar file WriteTar writes: a regular file of Data, or a header of
// another Type (tar.TypeSymlink, tar.TypeLink, ...) pointing at Link.
type TarMember struct {
	Name string
	Type byte // tar.TypeReg when 0
	Data string
	Link string
}

// WriteTar writes members, in order, to a tar file at path with archive/tar (PAX headers).
func WriteTar(t testing.TB, path string, members []TarMember) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range members {
		typ := m.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: m.Name, Typeflag: typ, Mode: 0o644, Linkname: m.Link, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			h.Size = int64(len(m.Data))
		}
		require.NoError(t, tw.WriteHeader(h))
		if h.Size > 0 {
			_, err := tw.Write([]byte(m.Data))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
}
