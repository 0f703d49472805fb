package layout

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func npyBytes(major byte, dict string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString(NpyMagic)
	b.WriteByte(major)
	b.WriteByte(0)
	if major == 1 {
		_ = binary.Write(&b, binary.LittleEndian, uint16(len(dict)))
	} else {
		_ = binary.Write(&b, binary.LittleEndian, uint32(len(dict)))
	}
	b.WriteString(dict)
	b.Write(data)
	return b.Bytes()
}

// FuzzParseNpy: the .npy header parser never panics, and what it accepts is consistent: the
// data it describes fits the file exactly.
func FuzzParseNpy(f *testing.F) {
	f.Add(npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", make([]byte, 24)))
	f.Add(npyBytes(2, "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }\n", make([]byte, 5)))
	f.Add(npyBytes(3, "{'descr': '<U3', 'fortran_order': False, 'shape': (1, 2), }\n", make([]byte, 24)))
	f.Add(npyBytes(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }\n", make([]byte, 32)))
	f.Add(npyBytes(1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }\n", make([]byte, 4)))
	f.Add([]byte("\x93NUMPY\x01\x00\xff\xff{"))
	f.Fuzz(func(t *testing.T, file []byte) {
		npy, err := ParseNpy("fuzz.npy", bytes.NewReader(file), int64(len(file)))
		if err != nil {
			return
		}
		if npy.RecordSize <= 0 && npy.Records > 0 {
			t.Fatalf("accepted records of %d bytes", npy.RecordSize)
		}
		if npy.DataOffset+npy.Records*npy.RecordSize != int64(len(file)) {
			t.Fatalf("header describes %d+%d*%d bytes, the file has %d", npy.DataOffset, npy.Records, npy.RecordSize, len(file))
		}
	})
}
