package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring's system calls and layout (include/uapi/linux/io_uring.h), and FUSE's commands on
// it (include/uapi/linux/fuse.h, protocol 7.42 and later).
const (
	sysIOURingSetup = 425
	sysIOURingEnter = 426

	setupSQE128       = 1 << 10
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13
	featSingleMmap    = 1 << 0
	enterGetEvents    = 1 << 0
	offSQRing         = 0
	offSQEs           = 0x10000000
	opURingCmd        = 46
	sqeSize           = 128 // SQE128: FUSE's command lies in the second half
	cqeSize           = 16
	paramsSize        = 120

	cmdRegister       = 1 // FUSE_IO_URING_CMD_REGISTER
	cmdCommitAndFetch = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	// struct fuse_uring_req_header: in_out[128], op_in[128], then fuse_uring_ent_in_out.
	hdrOpIn      = 128
	hdrCommitID  = 256 + 8
	hdrPayloadSz = 256 + 16
	hdrSize      = 256 + 32
)

// ring is one io_uring instance with its submission and completion queues mapped.
type ring struct {
	fd             int
	mem, sqes      []byte
	sqHead, sqTail *uint32
	sqMask         uint32
	sqArray        unsafe.Pointer
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer
}

func u32at(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// newRing sets up a ring of n 128-byte submission entries.
func newRing(n uint32) (*ring, error) {
	var p [paramsSize]byte
	le.PutUint32(p[8:], setupSQE128|setupSingleIssuer|setupDeferTaskrun)
	fd, _, e := unix.Syscall(sysIOURingSetup, uintptr(n), uintptr(unsafe.Pointer(&p[0])), 0)
	if e != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", e)
	}
	sqEntries, cqEntries := le.Uint32(p[0:]), le.Uint32(p[4:])
	if le.Uint32(p[20:])&featSingleMmap == 0 {
		unix.Close(int(fd))
		return nil, errors.New("io_uring without IORING_FEAT_SINGLE_MMAP")
	}
	sq, cq := p[40:80], p[80:120]
	size := max(le.Uint32(sq[24:])+sqEntries*4, le.Uint32(cq[20:])+cqEntries*cqeSize)
	mem, err := unix.Mmap(int(fd), offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap io_uring: %w", err)
	}
	sqes, err := unix.Mmap(int(fd), offSQEs, int(sqEntries*sqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap io_uring entries: %w", err)
	}
	return &ring{
		fd: int(fd), mem: mem, sqes: sqes,
		sqHead: u32at(mem, le.Uint32(sq[0:])), sqTail: u32at(mem, le.Uint32(sq[4:])),
		sqMask: *u32at(mem, le.Uint32(sq[8:])), sqArray: unsafe.Pointer(&mem[le.Uint32(sq[24:])]),
		cqHead: u32at(mem, le.Uint32(cq[0:])), cqTail: u32at(mem, le.Uint32(cq[4:])),
		cqMask: *u32at(mem, le.Uint32(cq[8:])), cqes: unsafe.Pointer(&mem[le.Uint32(cq[20:])]),
	}, nil
}

// next returns the next submission entry, zeroed, and queues it (it goes with the next enter).
func (r *ring) next() []byte {
	tail := *r.sqTail
	i := tail & r.sqMask
	sqe := r.sqes[i*sqeSize : (i+1)*sqeSize]
	clear(sqe)
	*(*uint32)(unsafe.Add(r.sqArray, 4*i)) = i
	atomic.StoreUint32(r.sqTail, tail+1)
	return sqe
}

// enter submits what is queued and waits for at least wait completions.
func (r *ring) enter(wait uint32) error {
	for {
		pending := atomic.LoadUint32(r.sqTail) - atomic.LoadUint32(r.sqHead)
		_, _, e := unix.Syscall6(sysIOURingEnter, uintptr(r.fd), uintptr(pending), uintptr(wait), enterGetEvents, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return fmt.Errorf("io_uring_enter: %w", e)
		}
		return nil
	}
}

// completions calls f with each completion's user_data and result, then frees them.
func (r *ring) completions(f func(data uint64, res int32) error) error {
	head := *r.cqHead
	defer func() { atomic.StoreUint32(r.cqHead, head) }()
	for ; head != atomic.LoadUint32(r.cqTail); head++ {
		cqe := unsafe.Slice((*byte)(unsafe.Add(r.cqes, (head&r.cqMask)*cqeSize)), cqeSize)
		if err := f(le.Uint64(cqe[0:]), int32(le.Uint32(cqe[8:]))); err != nil {
			head++
			return err
		}
	}
	return nil
}

// entry is one ring entry of a queue: the header and payload buffers the kernel fills with a
// request and reads the reply from.
type entry struct {
	hdr, payload []byte
	iov          [2]unix.Iovec
}

// fuseCmd queues FUSE command cmd for entry i of queue qid on r.
func fuseCmd(r *ring, fuseFD int, cmd uint32, i int, e *entry, qid uint16, commitID uint64) {
	sqe := r.next()
	sqe[0] = opURingCmd
	le.PutUint32(sqe[4:], uint32(fuseFD))
	le.PutUint32(sqe[8:], cmd)
	if cmd == cmdRegister {
		le.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(&e.iov[0]))))
		le.PutUint32(sqe[24:], 2)
	}
	le.PutUint64(sqe[32:], uint64(i))
	le.PutUint64(sqe[56:], commitID) // struct fuse_uring_cmd_req: flags, commit_id, qid
	le.PutUint16(sqe[64:], qid)
}

// startQueues registers entries ring entries on each of the kernel's queues (one per possible
// CPU), each queue served by a thread of its own on its CPU; a queue's end is sent on done.
func startQueues(fuseFD int, s *server, entries int, done chan<- error) error {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return err
	}
	_, last, _ := strings.Cut(strings.TrimSpace(string(b)), "-")
	n, err := strconv.Atoi(last)
	if err != nil {
		n = 0
	}
	started := make(chan error, n+1)
	for q := 0; q <= n; q++ {
		go func() { done <- s.queueLoop(fuseFD, uint16(q), entries, started) }()
	}
	for q := 0; q <= n; q++ {
		if err := <-started; err != nil {
			return err
		}
	}
	return nil
}

// queueLoop serves queue qid: it registers its entries, then answers each request its ring
// completes with the reply and a fetch of the next, in one submission.
func (s *server) queueLoop(fuseFD int, qid uint16, n int, started chan<- error) error {
	runtime.LockOSThread()
	if s.pin {
		var cpus unix.CPUSet
		cpus.Set(int(qid))
		unix.SchedSetaffinity(0, &cpus)
	}
	r, err := newRing(uint32(2 * n))
	if err != nil {
		started <- err
		return err
	}
	ents := make([]*entry, n)
	for i := range ents {
		mem, err := unix.Mmap(-1, 0, 4096+maxRequest, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err != nil {
			started <- err
			return err
		}
		e := &entry{hdr: mem[:hdrSize], payload: mem[4096:]}
		e.iov[0] = unix.Iovec{Base: &e.hdr[0], Len: hdrSize}
		e.iov[1] = unix.Iovec{Base: &e.payload[0], Len: maxRequest}
		ents[i] = e
		fuseCmd(r, fuseFD, cmdRegister, i, e, qid, 0)
	}
	serve := func(i uint64, res int32) error {
		if res < 0 {
			return fmt.Errorf("queue %d: %w", qid, syscall.Errno(-res))
		}
		e := ents[i]
		s.answer(e)
		fuseCmd(r, fuseFD, cmdCommitAndFetch, int(i), e, qid, le.Uint64(e.hdr[hdrCommitID:]))
		return nil
	}
	// The registrations submitted, and any that failed at once reported, before the caller
	// says it is ready.
	err = r.enter(0)
	if err == nil {
		err = r.completions(serve)
	}
	started <- err
	for err == nil {
		if err = r.enter(1); err == nil {
			err = r.completions(serve)
		}
	}
	if errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECANCELED) || errors.Is(err, syscall.ENODEV) {
		return nil
	}
	return err
}

// answer serves the request in e and writes its reply there.
func (s *server) answer(e *entry) {
	s.viaRing.Add(1)
	req := parseHeader(e.hdr)
	req.op = e.hdr[hdrOpIn : hdrOpIn+arg0Size[req.opcode]]
	req.rest = e.payload[:le.Uint32(e.hdr[hdrPayloadSz:])]
	size, errno := s.handle(req, e.payload)
	if errno != 0 {
		size = 0
	}
	le.PutUint32(e.hdr[0:], uint32(outHeaderSize+size))
	le.PutUint32(e.hdr[4:], uint32(-int32(errno)))
	le.PutUint64(e.hdr[8:], req.unique)
	le.PutUint32(e.hdr[hdrPayloadSz:], uint32(size))
}
