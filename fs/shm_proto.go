package fs

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The shared-memory read protocol (docs/SHM.md): a client process maps buffers of its own
// (memfds) into the daemon over a SOCK_SEQPACKET Unix socket, then asks for byte ranges of the
// mount's files, which the daemon copies from its cache straight into those buffers, with no
// FUSE request and no copy in the client. Every message is one packet: a fixed header, then a
// path (requests) or an error message (replies). Integers are little-endian.

// shmMagic starts every packet: "BFS1".
const shmMagic = 0x31534642

// Request ops.
const (
	shmMap   = 1 // map the memfd passed with the packet (SCM_RIGHTS) as buffer Buffer, of A bytes
	shmUnmap = 2 // unmap buffer Buffer
	shmRead  = 3 // read C bytes of Path at offset B into buffer Buffer at offset A
	shmHello = 4 // nothing: the reply says whether this client may read the mount
)

// Sizes and bounds of the protocol.
const (
	shmReqHeader    = 40       // bytes of a request's header
	shmReplyHeader  = 16       // bytes of a reply's header
	shmMaxPath      = 1024     // the longest path a request may name
	shmMaxPacket    = 4096     // the largest packet either side sends
	shmMaxMessage   = 2048     // the longest error message a reply carries
	shmMaxBuffers   = 8        // buffers one connection may have mapped at once
	shmMaxConns     = 1024     // connections one daemon serves at once
	shmMaxRefused   = 64       // connections of users refused that it answers at once (more: closed)
	shmMaxMapped    = 4 << 30  // bytes one connection may have mapped at once
	shmMaxMappedAll = 64 << 30 // bytes of every connection's buffers mapped at once
)

// shmRequest is one request packet: Op, the buffer it concerns, three numbers whose meaning
// is the op's, and a path (shmRead's).
type shmRequest struct {
	Op, Buffer uint32
	A, B, C    uint64
	Path       string
}

// errShmPacket is a malformed packet: the daemon closes the connection.
var errShmPacket = errors.New("malformed request")

// parseShmRequest decodes one request packet.
func parseShmRequest(p []byte) (shmRequest, error) {
	if len(p) < shmReqHeader {
		return shmRequest{}, fmt.Errorf("%w: %d bytes, want at least %d", errShmPacket, len(p), shmReqHeader)
	}
	le := binary.LittleEndian
	if m := le.Uint32(p); m != shmMagic {
		return shmRequest{}, fmt.Errorf("%w: magic %#x", errShmPacket, m)
	}
	r := shmRequest{Op: le.Uint32(p[4:]), Buffer: le.Uint32(p[8:]), A: le.Uint64(p[16:]), B: le.Uint64(p[24:]), C: le.Uint64(p[32:])}
	n := le.Uint32(p[12:])
	if n > shmMaxPath || int(n) != len(p)-shmReqHeader {
		return shmRequest{}, fmt.Errorf("%w: path of %d bytes in a packet of %d", errShmPacket, n, len(p))
	}
	r.Path = string(p[shmReqHeader:])
	return r, nil
}

// appendShmReply encodes a reply: errno (0 for success), n (bytes read by shmRead) and, with
// an errno, what went wrong, cut to shmMaxMessage bytes.
func appendShmReply(b []byte, errno uint32, n uint64, msg string) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, shmMagic)
	b = le.AppendUint32(b, errno)
	b = le.AppendUint64(b, n)
	if len(msg) > shmMaxMessage {
		msg = msg[:shmMaxMessage]
	}
	return append(b, msg...)
}
