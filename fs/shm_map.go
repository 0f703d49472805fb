package fs

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// mapBuffer maps the memfd of a shmMap request as buffer req.Buffer of req.A bytes. The memfd
// must be one of shmem (not hugetlbfs), sealed against shrinking (so the daemon's writes never
// fault past its end), and the A bytes' pages already written by the client (zeroed or
// filled: so they are the client's memory, charged to its cgroup, not the daemon's, and the
// daemon's fill maps them without zeroing any). Once it is mapped the daemon seals it against
// future writers (F_SEAL_FUTURE_WRITE, then F_SEAL_SEAL): the mappings made before go on
// writing, but no one can punch holes in it any more (fallocate's PUNCH_HOLE, MADV_REMOVE), so
// the pages the daemon writes stay those the client made; an unsealed client could otherwise
// free them and have each of the daemon's copies allocate them again, charged to the daemon.
// The pages are checked after that seal, so no hole can be punched in between.
func (sc *shmConn) mapBuffer(req shmRequest, fds []int) (uint32, string) {
	defer closeAll(fds)
	size := int64(req.A)
	switch {
	case len(fds) != 1:
		return uint32(syscall.EINVAL), fmt.Sprintf("map: %d descriptors passed, want 1 (a memfd)", len(fds))
	case sc.bufs[req.Buffer] != nil:
		return uint32(syscall.EEXIST), fmt.Sprintf("map: buffer %d is mapped already", req.Buffer)
	case len(sc.bufs) >= shmMaxBuffers:
		return uint32(syscall.ENOSPC), fmt.Sprintf("map: %d buffers mapped, the most a connection may have", len(sc.bufs))
	case size <= 0 || size > shmMaxMapped-sc.mapped:
		return uint32(syscall.ENOSPC), fmt.Sprintf("map: %d bytes: a connection may map at most %d in all (%d mapped)", size, int64(shmMaxMapped), sc.mapped)
	case !reserve(&sc.s.mapped, size, shmMaxMappedAll):
		return uint32(syscall.ENOSPC), fmt.Sprintf("map: %d bytes: the daemon maps at most %d of its clients' buffers in all (%d mapped)", size, int64(shmMaxMappedAll), sc.s.mapped.Load())
	}
	mapped := false
	defer func() {
		if !mapped {
			sc.s.mapped.Add(-size)
		}
	}()
	fd := fds[0]
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	switch {
	case err != nil || seals&unix.F_SEAL_SHRINK == 0:
		return uint32(syscall.EINVAL), "map: the buffer is not a memfd sealed with F_SEAL_SHRINK"
	case seals&(unix.F_SEAL_SEAL|unix.F_SEAL_WRITE|unix.F_SEAL_FUTURE_WRITE) != 0:
		return uint32(syscall.EINVAL), "map: the memfd is sealed with F_SEAL_SEAL or against writes: leave those to the daemon, which adds F_SEAL_FUTURE_WRITE and F_SEAL_SEAL once it has mapped the buffer (docs/SHM.md)"
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < size {
		return uint32(syscall.EINVAL), fmt.Sprintf("map: the memfd holds %d bytes, fewer than %d", st.Size, size)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.TMPFS_MAGIC {
		return uint32(syscall.EINVAL), "map: the memfd is not of shared memory (made with MFD_HUGETLB?): make it without"
	}
	if errno, msg := written(fd, size); errno != 0 {
		return errno, msg // before sealing, so that the client may write the pages and map it again
	}
	b, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return uint32(syscall.ENOMEM), fmt.Sprintf("map: %v", err)
	}
	if errno, msg := sealWritten(fd, size); errno != 0 {
		unix.Munmap(b)
		return errno, msg
	}
	populate(b)
	sc.bufs[req.Buffer] = b
	sc.mapped += size
	mapped = true
	return 0, ""
}

// reserve adds n to *v if the sum stays within most, and reports whether it did.
func reserve(v *atomic.Int64, n, most int64) bool {
	for {
		old := v.Load()
		if old+n > most {
			return false
		}
		if v.CompareAndSwap(old, old+n) {
			return true
		}
	}
}

// sealWritten seals the mapped memfd fd against future writers and further seals, then
// checks again that its first size bytes are written (mapBuffer says why, in that order).
func sealWritten(fd int, size int64) (uint32, string) {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE|unix.F_SEAL_SEAL); err != nil {
		return uint32(syscall.EINVAL), fmt.Sprintf("map: cannot seal the memfd against future writers: %v", err)
	}
	return written(fd, size)
}

// written checks that every page of the first size bytes of the shmem memfd fd has been
// written (touched): lseek's SEEK_HOLE counts a hole and a page only fallocated, never written,
// alike, and either would be made or zeroed by the daemon's first touch, a hole's page charged
// to the daemon. (Counting the memfd's blocks instead would not do: pages fallocated past its
// end count among them.) The file offset, shared with the client's descriptor, is put back.
func written(fd int, size int64) (uint32, string) {
	at, err := unix.Seek(fd, 0, io.SeekCurrent)
	if err != nil {
		return uint32(syscall.EINVAL), fmt.Sprintf("map: %v", err)
	}
	hole, err := unix.Seek(fd, 0, unix.SEEK_HOLE)
	_, _ = unix.Seek(fd, at, io.SeekStart)
	switch {
	case err != nil:
		return uint32(syscall.EINVAL), fmt.Sprintf("map: %v", err)
	case hole < size:
		return uint32(syscall.EINVAL), fmt.Sprintf("map: the buffer's pages are not all in memory: byte %d of its %d was never written (write every page before mapping it, e.g. with madvise(MADV_POPULATE_WRITE) or MAP_POPULATE; posix_fallocate alone leaves them unwritten: docs/SHM.md)", hole, size)
	}
	return 0, ""
}

// populateChunk is how much of a new buffer one madvise call fills the page tables of.
const populateChunk = 2 << 20

// populate fills the page tables of the daemon's mapping b of a client's buffer now: a copy
// that found them empty would take a fault a page, 12 times as long (220 ms against 18 for 74
// MiB on the development machines), in a read the trainer waits for. Best effort (Linux 5.14):
// without it the copies fill them.
//
// MADV_POPULATE_READ where it serves (populateAdvice), not _WRITE: the client has written
// every page (mapBuffer checks), so a read fault maps the pages around it too (the kernel's
// fault-around, 64 KiB by default), writable, as the mapping is shared and shmem keeps no dirty
// accounting, where a write fault maps one page: 75 MiB in 6.7-7.0 ms against 16.2-16.5, and
// 16 clients' at once 62-64 ms against 144-145 on 2 cores (BenchmarkPopulateTogether).
// In chunks: one call for the whole buffer holds the daemon's mmap_lock (for reading) all
// along, and the next client's mmap (which takes it for writing) waits for it, and every fill
// after that mmap waits for the mmap, so the buffers of clients that start together were
// filled one after another; in chunks of 2 MiB the lock is let go every fraction of a
// millisecond (16 clients at once, 2-core machine: 206-219 ms one call each, 144 in chunks).
func populate(b []byte) {
	populateWith(b, populateChunk, populateAdvice())
}

// populateWith is populate with the chunk and the advice (MADV_POPULATE_READ or _WRITE) given.
func populateWith(b []byte, chunk, advice int) {
	for off := 0; off < len(b); off += chunk {
		if unix.Madvise(b[off:min(off+chunk, len(b))], advice) != nil {
			return
		}
	}
}

// populateAdvice is the advice populate fills with, found once: MADV_POPULATE_READ where a
// write to a page it mapped takes no fault, as where the CPU sets a page's dirty bit itself
// (x86, arm64 with hardware dirty-bit management), else MADV_POPULATE_WRITE: on a CPU without
// that, each page's first write would fault, in the reads the fill is there to spare.
var populateAdvice = sync.OnceValue(func() int {
	const size = 64 << 12
	fd, err := unix.MemfdCreate("blockfs-probe", unix.MFD_CLOEXEC)
	if err != nil {
		return unix.MADV_POPULATE_WRITE
	}
	defer unix.Close(fd)
	if unix.Ftruncate(fd, size) != nil {
		return unix.MADV_POPULATE_WRITE
	}
	var maps [2][]byte // the client's (written) and the daemon's
	for i := range maps {
		if maps[i], err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			return unix.MADV_POPULATE_WRITE
		}
		defer unix.Munmap(maps[i])
	}
	if unix.Madvise(maps[0], unix.MADV_POPULATE_WRITE) != nil || unix.Madvise(maps[1], unix.MADV_POPULATE_READ) != nil ||
		writeFaults(maps[1]) != 0 {
		return unix.MADV_POPULATE_WRITE
	}
	return unix.MADV_POPULATE_READ
})

// writeFaults writes a byte to each page of b on one thread and returns the page faults that
// thread took meanwhile.
func writeFaults(b []byte) int64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &before) != nil {
		return -1
	}
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	if unix.Getrusage(unix.RUSAGE_THREAD, &after) != nil {
		return -1
	}
	return (after.Minflt - before.Minflt) + (after.Majflt - before.Majflt)
}

func (sc *shmConn) unmapBuffer(id uint32) (uint32, string) {
	b := sc.bufs[id]
	if b == nil {
		return uint32(syscall.ENOENT), fmt.Sprintf("unmap: no buffer %d", id)
	}
	unix.Munmap(b)
	delete(sc.bufs, id)
	sc.mapped -= int64(len(b))
	sc.s.mapped.Add(-int64(len(b)))
	return 0, ""
}
