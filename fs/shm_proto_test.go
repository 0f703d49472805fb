package fs

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShmRequestRoundTrip(t *testing.T) {
	want := shmRequest{Op: shmRead, Buffer: 7, A: 1 << 40, B: 12345, C: 1 << 20, Path: "shard-1-of-3/epoch-0002.ids"}
	got, err := parseShmRequest(appendShmRequest(nil, want))
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestShmRequestRefused(t *testing.T) {
	good := appendShmRequest(nil, shmRequest{Op: shmRead, Path: "epoch-0000"})
	badMagic := append([]byte{}, good...)
	badMagic[0] ^= 1
	longer := append([]byte{}, good...)
	binary.LittleEndian.PutUint32(longer[12:], 11)
	tooLong := appendShmRequest(nil, shmRequest{Op: shmRead, Path: string(make([]byte, shmMaxPath+1))})
	for name, p := range map[string][]byte{
		"empty": nil, "short": good[:shmReqHeader-1], "magic": badMagic, "path length": longer, "path too long": tooLong,
	} {
		_, err := parseShmRequest(p)
		assert.ErrorIs(t, err, errShmPacket, name)
	}
}

func TestShmReplyMessageBounded(t *testing.T) {
	r := appendShmReply(nil, 5, 0, string(make([]byte, 3*shmMaxMessage)))
	assert.Len(t, r, shmReplyHeader+shmMaxMessage)
	assert.LessOrEqual(t, len(r), shmMaxPacket)
}

// FuzzShmRequest: no packet makes the parser panic, and what it accepts encodes back to itself.
func FuzzShmRequest(f *testing.F) {
	f.Add(appendShmRequest(nil, shmRequest{Op: shmRead, Buffer: 1, A: 2, B: 3, C: 4, Path: "epoch-0001"}))
	f.Add(appendShmRequest(nil, shmRequest{Op: shmHello}))
	f.Add([]byte("BFS1"))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := parseShmRequest(p)
		if err != nil {
			return
		}
		if got := appendShmRequest(nil, r); string(got) != string(p) {
			t.Fatalf("%x parses to %+v, which encodes to %x", p, r, got)
		}
	})
}

// appendShmRequest encodes r (the client's side; the tests' and the Go client's).
func appendShmRequest(b []byte, r shmRequest) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, shmMagic)
	b = le.AppendUint32(b, r.Op)
	b = le.AppendUint32(b, r.Buffer)
	b = le.AppendUint32(b, uint32(len(r.Path)))
	b = le.AppendUint64(b, r.A)
	b = le.AppendUint64(b, r.B)
	b = le.AppendUint64(b, r.C)
	return append(b, r.Path...)
}
