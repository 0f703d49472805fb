package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// The FUSE protocol's opcodes and sizes this server needs (include/uapi/linux/fuse.h).
const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opOpen        = 14
	opRead        = 15
	opStatfs      = 17
	opRelease     = 18
	opFlush       = 25
	opInit        = 26
	opOpendir     = 27
	opReleasedir  = 29
	opInterrupt   = 36
	opDestroy     = 38
	opBatchForget = 42

	inHeaderSize  = 40
	outHeaderSize = 16
	attrSize      = 88
	maxRequest    = 1 << 20 // max_pages 256 and max_write: 1 MiB requests

	initFlagAsyncRead  = 1 << 0
	initFlagBigWrites  = 1 << 5
	initFlagMaxPages   = 1 << 22
	initFlagInitExt    = 1 << 30
	initFlag2OverUring = 1 << (41 - 32) // FUSE_OVER_IO_URING, in flags2
)

var le = binary.LittleEndian

// arg0Size is the size of each opcode's first input argument: /dev/fuse delivers the arguments
// one after the other, io_uring the first in the header's op_in and the rest in the payload.
var arg0Size = map[uint32]int{opGetattr: 16, opOpen: 8, opRead: 40, opRelease: 24, opFlush: 24, opInit: 64, opOpendir: 8, opReleasedir: 24}

// config is what fuseuring's flags choose.
type config struct {
	uring            bool // FUSE over io_uring rather than /dev/fuse's reads and writes
	files            int
	size             int64
	readers, entries int  // /dev/fuse's reading goroutines; ring entries per queue
	pin              bool // each io_uring queue's thread on its queue's CPU
	gather           bool // /dev/fuse: a read's reply copied into a buffer first, as io_uring needs
	poll             bool // /dev/fuse read non-blocking through Go's poller
	clone            bool // /dev/fuse: each reader past the first on a clone of it (FUSE_DEV_IOC_CLONE)
}

// server serves the files f0 .. fN-1, each size bytes of pattern repeated from an offset of
// its own.
type server struct {
	config
	pattern []byte
	once    sync.Once
	reads   atomic.Int64
	bytes   atomic.Int64
	viaRing atomic.Int64 // requests answered on an io_uring queue
}

func newServer(c config) *server {
	return &server{config: c, pattern: patternBytes()}
}

// request is one FUSE request: its header's fields, its first argument (op) and the rest.
type request struct {
	opcode uint32
	unique uint64
	nodeID uint64
	op     []byte
	rest   []byte
}

func parseHeader(h []byte) request {
	return request{opcode: le.Uint32(h[4:]), unique: le.Uint64(h[8:]), nodeID: le.Uint64(h[16:])}
}

// noReply says whether the kernel expects no reply to the opcode.
func noReply(opcode uint32) bool {
	return opcode == opForget || opcode == opBatchForget || opcode == opInterrupt
}

// handle serves req, writing its reply's body into out (which may be the buffer req.rest lies
// in: every argument is read before out is written); it returns the body's size or an errno.
func (s *server) handle(req request, out []byte) (int, syscall.Errno) {
	switch req.opcode {
	case opInit:
		return s.initReply(req.op, out)
	case opLookup:
		name := strings.TrimRight(string(req.rest), "\x00")
		i, ok := strings.CutPrefix(name, "f")
		n, err := strconv.Atoi(i)
		if req.nodeID != 1 || !ok || err != nil || n < 0 || n >= s.files || strconv.Itoa(n) != i {
			return 0, syscall.ENOENT
		}
		clear(out[:40+attrSize])
		le.PutUint64(out[0:], uint64(n)+2) // nodeid
		le.PutUint64(out[16:], 3600)       // entry_valid
		le.PutUint64(out[24:], 3600)       // attr_valid
		s.attr(out[40:], uint64(n)+2)
		return 40 + attrSize, 0
	case opGetattr:
		clear(out[:16+attrSize])
		le.PutUint64(out[0:], 3600) // attr_valid
		s.attr(out[16:], req.nodeID)
		return 16 + attrSize, 0
	case opOpen, opOpendir:
		clear(out[:16])
		return 16, 0
	case opRead:
		return s.read(req, out)
	case opRelease, opReleasedir, opFlush, opDestroy:
		return 0, 0
	case opStatfs:
		clear(out[:80])
		le.PutUint32(out[40:], 4096) // bsize
		le.PutUint32(out[44:], 255)  // namelen
		return 80, 0
	}
	return 0, syscall.ENOSYS
}

// attr writes node's fuse_attr: the root directory (node 1) or a file.
func (s *server) attr(a []byte, node uint64) {
	clear(a[:attrSize])
	le.PutUint64(a[0:], node)
	mode, nlink := uint32(syscall.S_IFDIR|0o555), uint32(2)
	if node != 1 {
		mode, nlink = syscall.S_IFREG|0o444, 1
		le.PutUint64(a[8:], uint64(s.size))
		le.PutUint64(a[16:], uint64(s.size+511)/512)
	}
	le.PutUint32(a[60:], mode)
	le.PutUint32(a[64:], nlink)
	le.PutUint32(a[80:], 4096) // blksize
}

// pieces returns the requested range of the file: file k's byte at offset o is
// pattern[(o + k*4099) mod len(pattern)], so the range is one or two slices of the pattern.
func (s *server) pieces(req request, limit int64) ([][]byte, syscall.Errno) {
	off, size := int64(le.Uint64(req.op[8:])), int64(le.Uint32(req.op[16:]))
	if req.nodeID < 2 {
		return nil, syscall.EISDIR
	}
	if off >= s.size {
		return nil, 0
	}
	size = min(size, s.size-off, limit)
	s.reads.Add(1)
	s.bytes.Add(size)
	p := (off + int64(req.nodeID-2)*4099) % int64(len(s.pattern))
	var out [][]byte
	for size > 0 {
		c := min(size, int64(len(s.pattern))-p)
		out = append(out, s.pattern[p:p+c])
		size -= c
		p = 0
	}
	return out, 0
}

// read gathers the requested range into out.
func (s *server) read(req request, out []byte) (int, syscall.Errno) {
	ps, errno := s.pieces(req, int64(len(out)))
	n := 0
	for _, p := range ps {
		n += copy(out[n:], p)
	}
	return n, errno
}

// initReply answers FUSE_INIT: the kernel's minor version, 1 MiB requests, asynchronous reads,
// and FUSE over io_uring when the server was asked for it.
func (s *server) initReply(in, out []byte) (int, syscall.Errno) {
	major, minor := le.Uint32(in[0:]), le.Uint32(in[4:])
	if major != 7 {
		return 0, syscall.EPROTO
	}
	clear(out[:64])
	le.PutUint32(out[0:], 7)
	le.PutUint32(out[4:], min(minor, 45))
	le.PutUint32(out[8:], le.Uint32(in[8:])) // max_readahead: the kernel's
	le.PutUint32(out[12:], initFlagAsyncRead|initFlagBigWrites|initFlagMaxPages|initFlagInitExt)
	le.PutUint16(out[16:], 16)         // max_background, as blockfs
	le.PutUint16(out[18:], 12)         // congestion_threshold
	le.PutUint32(out[20:], maxRequest) // max_write
	le.PutUint32(out[24:], 1)          // time_gran
	le.PutUint16(out[28:], maxRequest/4096)
	if s.uring {
		le.PutUint32(out[32:], initFlag2OverUring)
	}
	return 64, 0
}

// devLoop reads requests from /dev/fuse (through polled, a non-blocking descriptor of its own
// read through Go's poller, where given) and writes their replies, until the mount goes away
// (nil) or a read fails otherwise. The first FUSE_INIT's reply is reported on inited.
func (s *server) devLoop(fd int, polled *os.File, inited chan<- error) error {
	buf := make([]byte, inHeaderSize+4096+maxRequest)
	reply := make([]byte, outHeaderSize+maxRequest)
	read := func() (int, error) { return syscall.Read(fd, buf) }
	if polled != nil {
		// The goroutine parks in Go's poller until a request comes instead of its thread
		// blocking in read(2).
		read = func() (int, error) { return polled.Read(buf) }
	}
	for {
		n, err := read()
		switch {
		case errors.Is(err, syscall.EINTR), errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.EAGAIN):
			continue
		case errors.Is(err, syscall.ENODEV):
			return nil
		case err != nil:
			return fmt.Errorf("read /dev/fuse: %w", err)
		case n < inHeaderSize:
			return fmt.Errorf("read /dev/fuse: a request of %d bytes", n)
		}
		req := parseHeader(buf)
		body := buf[inHeaderSize:n]
		a := min(arg0Size[req.opcode], len(body))
		req.op, req.rest = body[:a], body[a:]
		if noReply(req.opcode) {
			continue
		}
		iov := [][]byte{reply[:outHeaderSize], nil, nil}[:1]
		size, errno := 0, syscall.Errno(0)
		if req.opcode == opRead && !s.gather {
			// As blockfs: the reply written from the memory it lies in, no copy in user space.
			var ps [][]byte
			ps, errno = s.pieces(req, maxRequest)
			for _, p := range ps {
				iov = append(iov, p)
				size += len(p)
			}
		} else {
			size, errno = s.handle(req, reply[outHeaderSize:])
			iov[0] = reply[:outHeaderSize+size]
		}
		if errno != 0 {
			size, iov = 0, iov[:1]
			iov[0] = reply[:outHeaderSize]
		}
		le.PutUint32(reply[0:], uint32(outHeaderSize+size))
		le.PutUint32(reply[4:], uint32(-int32(errno)))
		le.PutUint64(reply[8:], req.unique)
		if _, err := unix.Writev(fd, iov); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("write /dev/fuse: %w", err)
		}
		if req.opcode == opInit {
			s.once.Do(func() { inited <- nil })
		}
	}
}
