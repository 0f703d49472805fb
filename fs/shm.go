package fs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/view"
)

// The shared-memory read path (docs/SHM.md; the wire format is shm_proto.go's). A trainer on the
// same machine maps buffers of its own into the daemon and asks for byte ranges of the mount's
// files by path; the daemon copies them from its cache into those buffers, one copy, on a
// goroutine per connection and, for a large read, on as many more as there are cores. The bytes
// are those a read of the file through FUSE returns: the path resolves as a lookup does, and
// the read goes through the same view.Reader (readahead included). A client gets only what it
// could read through the mount: its uid is the daemon's, or the mount lets other users in. The
// daemon writes only into the client's buffers and never maps its cache into a client.
//
// Lock order: shmServer.mu, then nothing.

// shmChunk is the least a large read is cut into to be copied on several goroutines, and the
// most one copy asks of its file at a time: a read is as large as the client's buffer, and some
// files (a field in its own blocks, a mixture) make a buffer of what one read asks. At most a
// goroutine a connection and one a spare core copy at once, so such buffers hold at most
// (connections + cores) x shmChunk.
const shmChunk = 4 << 20

// shmRefuseTimeout bounds how long a refused user's connection is answered.
const shmRefuseTimeout = 5 * time.Second

// shmFiles is how many files a connection keeps open (two epochs of a dataset with fields).
const shmFiles = 32

// shmWriteTimeout bounds how long a reply may wait for a client that does not read it.
const shmWriteTimeout = time.Minute

// shmServer serves the protocol for one mount. Immutable after listenShm but for mu's fields.
type shmServer struct {
	m      *mount
	ln     *net.UnixListener
	addr   string // the abstract socket's name, "@blockfs-..." (info.json's shm_socket)
	ctx    context.Context
	cancel context.CancelFunc

	spare   chan struct{} // a token for each core a large read may copy on besides its own
	reads   atomic.Uint64 // reads served
	clients atomic.Int64  // connections now
	mapped  atomic.Int64  // bytes of client buffers mapped now

	mu      sync.Mutex
	conns   map[*net.UnixConn]struct{} // guarded by mu
	refused map[*net.UnixConn]struct{} // connections being refused (guarded by mu)
	closed  bool                       // guarded by mu
	wg      sync.WaitGroup
}

// listenShm opens the socket of a mount's shared-memory path: an abstract Unix socket (no
// file to plant, remove or leave behind; it goes with the daemon) with a random name. start
// serves it once the mount is made.
func listenShm() (*shmServer, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	addr := "@blockfs-" + hex.EncodeToString(id[:])
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: addr, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("shared-memory socket: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &shmServer{ln: ln, addr: addr, ctx: ctx, cancel: cancel, conns: map[*net.UnixConn]struct{}{}, refused: map[*net.UnixConn]struct{}{},
		spare: make(chan struct{}, max(0, runtime.GOMAXPROCS(0)-1))}, nil
}

// start serves m on the socket.
func (s *shmServer) start(m *mount) {
	s.m = m
	m.shm.Store(s)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serve()
	}()
}

// serve accepts connections until close. A connection of a user who may not read the mount is
// answered apart (refuse), so that no number of them takes an allowed user's place; an error
// of accept (descriptors run out) is waited out, as it ends when connections close.
func (s *shmServer) serve() {
	wait := 5 * time.Millisecond
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if wait == 5*time.Millisecond {
				log.Printf("blockfs: shared-memory socket: %v (retrying)", err)
			}
			time.Sleep(wait)
			wait = min(2*wait, time.Second)
			continue
		}
		wait = 5 * time.Millisecond
		cred, err := peer(c)
		if err != nil {
			c.Close()
			continue
		}
		allowed := s.m.opt.AllowOther || cred.Uid == s.m.uid
		s.mu.Lock()
		if s.closed || (allowed && len(s.conns) >= shmMaxConns) || (!allowed && len(s.refused) >= shmMaxRefused) {
			s.mu.Unlock()
			c.Close()
			continue
		}
		if allowed {
			s.conns[c] = struct{}{}
		} else {
			s.refused[c] = struct{}{}
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			if allowed {
				s.handle(c, cred)
			} else {
				s.refuse(c, cred)
			}
			s.mu.Lock()
			delete(s.conns, c)
			delete(s.refused, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// refuse answers the first request of a user who may not read the mount, as the kernel
// refuses a FUSE mount's files to other users without allow_other, and closes the connection
// (after shmRefuseTimeout if the client sends nothing).
func (s *shmServer) refuse(c *net.UnixConn, cred *unix.Ucred) {
	c.SetReadDeadline(time.Now().Add(shmRefuseTimeout))
	in := make([]byte, shmMaxPacket)
	oob := make([]byte, unix.CmsgSpace(4*shmMaxBuffers))
	_, oobn, _, _, err := c.ReadMsgUnix(in, oob)
	closeAll(rights(oob[:oobn]))
	if err != nil {
		return
	}
	sc := &shmConn{s: s, c: c}
	sc.reply(uint32(syscall.EACCES), 0, fmt.Sprintf("uid %d may not read this mount (it is uid %d's; mount with %s to let other users read)", cred.Uid, s.m.uid, optname.Flag("allow-other")))
}

// stop stops accepting, ends every connection (their reads in progress are cancelled) and
// waits for them: each unmaps its buffers on the way out. Idempotent; nil does nothing.
func (s *shmServer) stop() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.ln.Close()
		s.cancel()
		for c := range s.conns {
			c.Close()
		}
		for c := range s.refused {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// peer returns the credentials of the process at the other end of c.
func peer(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	return cred, cerr
}

// shmConn is one client's connection: its buffers and the files it has read. Used by its own
// goroutine only.
type shmConn struct {
	s      *shmServer
	c      *net.UnixConn
	pid    uint32
	bufs   map[uint32][]byte
	mapped int64
	files  map[string]*shmFile
	out    []byte
}

// shmFile is a file a connection reads: its reader (readahead as a FUSE handle's) and its
// counters in stats.json's readers.
type shmFile struct {
	r    *view.Reader
	rd   *reader
	kind view.Kind
}

// handle serves c, a connection of a user who may read the mount, until the client goes, a
// packet is malformed, or the server closes.
func (s *shmServer) handle(c *net.UnixConn, cred *unix.Ucred) {
	sc := &shmConn{s: s, c: c, pid: uint32(cred.Pid), bufs: map[uint32][]byte{}, files: map[string]*shmFile{}}
	s.clients.Add(1)
	defer s.clients.Add(-1)
	defer sc.release()
	in := make([]byte, shmMaxPacket)
	oob := make([]byte, unix.CmsgSpace(4*shmMaxBuffers))
	for {
		n, oobn, flags, _, err := c.ReadMsgUnix(in, oob)
		// Descriptors first: an empty packet carrying some (read as the end) must close them.
		fds := rights(oob[:oobn])
		if err != nil || n == 0 || flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			closeAll(fds)
			return
		}
		req, err := parseShmRequest(in[:n])
		if err != nil {
			closeAll(fds)
			sc.reply(uint32(syscall.EINVAL), 0, err.Error())
			return
		}
		if req.Op != shmMap {
			closeAll(fds)
		}
		var errno uint32
		var got uint64
		var msg string
		switch req.Op {
		case shmHello:
		case shmMap:
			errno, msg = sc.mapBuffer(req, fds)
		case shmUnmap:
			errno, msg = sc.unmapBuffer(req.Buffer)
		case shmRead:
			got, errno, msg = sc.read(req)
		default:
			errno, msg = uint32(syscall.EINVAL), fmt.Sprintf("unknown op %d", req.Op)
		}
		if !sc.reply(errno, got, msg) {
			return
		}
	}
}

// rights returns the descriptors passed in a packet's control messages.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if f, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// reply sends one reply; false if the client is gone or does not read it in time.
func (sc *shmConn) reply(errno uint32, n uint64, msg string) bool {
	sc.out = appendShmReply(sc.out[:0], errno, n, msg)
	sc.c.SetWriteDeadline(time.Now().Add(shmWriteTimeout))
	_, err := sc.c.Write(sc.out)
	return err == nil
}

// shmSupported reports whether this kernel can seal a memfd against future writers (Linux
// 5.1), which the path needs to keep a client's buffers its own (mapBuffer); where it cannot,
// it logs that the path is off.
func shmSupported() bool {
	fd, err := unix.MemfdCreate("blockfs-probe", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE)
		unix.Close(fd)
	}
	if err != nil {
		log.Printf("blockfs: the shared-memory path is off: this kernel cannot seal a buffer against future writers (%v; Linux 5.1 or later); readers use the files", err)
	}
	return err == nil
}

// release unmaps the connection's buffers and closes its files.
func (sc *shmConn) release() {
	for id := range sc.bufs {
		sc.unmapBuffer(id)
	}
	sc.closeFiles()
}

func (sc *shmConn) closeFiles() {
	for p, f := range sc.files {
		sc.s.m.times.close(f.rd)
		delete(sc.files, p)
	}
}

// read serves a shmRead: up to req.C bytes of req.Path from req.B into buffer req.Buffer at
// req.A, clamped to the file's end as a read of the file is; it returns how many it copied.
func (sc *shmConn) read(req shmRequest) (uint64, uint32, string) {
	b := sc.bufs[req.Buffer]
	if b == nil {
		return 0, uint32(syscall.ENOENT), fmt.Sprintf("read: no buffer %d", req.Buffer)
	}
	if req.A > uint64(len(b)) || req.C > uint64(len(b))-req.A {
		return 0, uint32(syscall.EINVAL), fmt.Sprintf("read: %d bytes at %d do not fit buffer %d of %d bytes", req.C, req.A, req.Buffer, len(b))
	}
	if req.B > 1<<62 {
		return 0, uint32(syscall.EINVAL), fmt.Sprintf("read: offset %d", req.B)
	}
	f, errno, msg := sc.open(req.Path)
	if errno != 0 {
		return 0, errno, msg
	}
	m := sc.s.m
	off, size := int64(req.B), f.r.Size()
	n := int64(req.C)
	if off >= size {
		n = 0
	} else if n > size-off {
		n = size - off
	}
	m.reads.Add(1)
	sc.s.reads.Add(1)
	var w view.Waits
	start := time.Now()
	err := sc.copy(&w, f.r, b[req.A:req.A+uint64(n)], off)
	took := time.Since(start)
	m.times.read(f.rd, start, took, w.Duration(), off+n, int(n))
	if m.opt.OnRead != nil {
		m.opt.OnRead(took, w.Duration())
	}
	if err != nil {
		errno, line := m.readFailed(err, req.Path, off, true)
		return 0, uint32(errno), line
	}
	m.served[f.kind.Stat()].Add(uint64(n))
	return uint64(n), 0, ""
}

// copy fills dst from r at off: one gather (its cache pages copied into dst) on the
// connection's goroutine, and for a large read more at once on the cores no other client is
// copying on (spare): with many clients each copies its own reads, with one its reads use
// every core.
func (sc *shmConn) copy(w *view.Waits, r *view.Reader, dst []byte, off int64) error {
	chunks := min(len(dst)/shmChunk, cap(sc.s.spare)+1)
	if chunks <= 1 {
		return sc.readPieces(sc.s.ctx, w, r, dst, off)
	}
	per := (len(dst)/chunks + 4095) &^ 4095
	chunk := func(ctx context.Context, i int) error {
		a := min(i*per, len(dst))
		e := min(a+per, len(dst))
		if i == chunks-1 {
			e = len(dst)
		}
		return sc.readPieces(ctx, w, r, dst[a:e], off+int64(a))
	}
	ctx, cancel := context.WithCancel(sc.s.ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, chunks)
	next := 0
	for next < chunks-1 && trySend(sc.s.spare) {
		i := next
		next++
		wg.Add(1)
		go func() {
			defer func() { <-sc.s.spare; wg.Done() }()
			if errs[i] = chunk(ctx, i); errs[i] != nil {
				cancel()
			}
		}()
	}
	for ; next < chunks; next++ {
		if errs[next] = chunk(ctx, next); errs[next] != nil {
			cancel()
			break
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// shmReadFull is view.Reader.ReadFull (a test counts the pieces through it).
var shmReadFull = (*view.Reader).ReadFull

// readPieces fills dst from r at off, shmChunk bytes a call. (A token for each piece, shared by
// all connections, would bound them more tightly, but a piece waiting on an object store would
// hold its token, and cached reads of other clients would wait behind it.)
func (sc *shmConn) readPieces(ctx context.Context, w *view.Waits, r *view.Reader, dst []byte, off int64) error {
	for a := 0; a < len(dst); a += shmChunk {
		if err := shmReadFull(r, ctx, w, dst[a:min(a+shmChunk, len(dst))], off+int64(a)); err != nil {
			return err
		}
	}
	return nil
}

// trySend sends on c if it can without waiting.
func trySend(c chan struct{}) bool {
	select {
	case c <- struct{}{}:
		return true
	default:
		return false
	}
}

// open returns the connection's reader of path, a file of the mount's tree as a lookup
// resolves it: epoch-NNNN[.suffix] or shard-R-of-W/epoch-NNNN[.suffix].
func (sc *shmConn) open(path string) (*shmFile, uint32, string) {
	if f := sc.files[path]; f != nil {
		return f, 0, ""
	}
	m := sc.s.m
	name, root := path, true
	var r, w uint64
	if dir, rest, ok := strings.Cut(path, "/"); ok {
		var isShard bool
		r, w, isShard = view.ParseShardDir(dir)
		if !isShard {
			return nil, uint32(syscall.ENOENT), fmt.Sprintf("%s: no such file in the mount", path)
		}
		name, root = rest, false
	}
	epoch, kind, ok := view.ParseEpochFileOf(m.set, name)
	if !ok {
		return nil, uint32(syscall.ENOENT), fmt.Sprintf("%s: no such file in the mount", path)
	}
	n := &fileNode{m: m, epoch: epoch, kind: kind, root: root, r: r, w: w}
	vf, errno := n.open(sc.s.ctx)
	if errno != 0 {
		return nil, uint32(errno), fmt.Sprintf("%s: cannot open: %v", path, errno)
	}
	if len(sc.files) >= shmFiles {
		sc.closeFiles()
	}
	ahead := view.ReadaheadOf(m.set, kind, m.opt.Readahead)
	rd := m.times.openBy(sc.pid, path, vf.Size(), kind == view.Data)
	f := &shmFile{r: view.NewReader(vf, ahead), rd: rd, kind: kind}
	sc.files[path] = f
	return f, 0, ""
}
