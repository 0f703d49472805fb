package fs

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// clientBuffer makes a buffer as a client does: a memfd of size bytes, allocated and zeroed.
func clientBuffer(t testing.TB, size int) int {
	fd, err := unix.MemfdCreate("blockfs-test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	require.NoError(t, err)
	require.NoError(t, unix.Ftruncate(fd, int64(size)))
	require.NoError(t, unix.Fallocate(fd, 0, 0, int64(size)))
	// Zeroed as the Python client does (MADV_POPULATE_WRITE): the daemon's fill maps the pages.
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	require.NoError(t, unix.Madvise(m, unix.MADV_POPULATE_WRITE))
	require.NoError(t, unix.Munmap(m))
	return fd
}

// mappedBytes returns the Rss of this process's mapping that begins at b (its pages whose
// page-table entries are filled), from /proc/self/smaps.
func mappedBytes(t *testing.T, b []byte) int64 {
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&b[0])))
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		in = in || strings.HasPrefix(line, start)
		if in && strings.HasPrefix(line, "Rss:") { // the mapping's own: the first Rss after its header
			kb, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no mapping at %s in /proc/self/smaps", start)
	return 0
}

// TestPopulate: populate fills the page tables of the whole mapping, its last chunk a part of
// one included, and nothing before it is called; the pages are mapped writable, so the
// daemon's copies into them then take no faults; on x86 it does so by fault-around
// (MADV_POPULATE_READ: the CPU sets the dirty bit itself).
func TestPopulate(t *testing.T) {
	probe, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	if err := unix.Madvise(probe, unix.MADV_POPULATE_READ); err == unix.EINVAL {
		t.Skipf("MADV_POPULATE_READ: %v (Linux 5.14 or later): the daemon's copies fill the page tables", err)
	}
	require.NoError(t, unix.Munmap(probe))
	if runtime.GOARCH == "amd64" {
		require.Equal(t, unix.MADV_POPULATE_READ, populateAdvice(), "the fill's advice on x86")
	}
	for _, size := range []int{4 << 20, 5<<20 + 4096, 4096} {
		fd := clientBuffer(t, size)
		b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		require.NoError(t, err)
		require.Zero(t, mappedBytes(t, b), "a new mapping has page tables filled")
		populate(b)
		require.Equal(t, int64(size), mappedBytes(t, b), "%d bytes", size)
		if pages := size / 4096; pages >= 16 { // a stray fault on the thread (the runtime's) leaves slack
			faults := writeFaults(b)
			require.LessOrEqual(t, faults, int64(pages/16), "a write to each of %d pages after populate: %d faults", pages, faults)
		}
		require.NoError(t, unix.Munmap(b))
		require.NoError(t, unix.Close(fd))
	}
}

// BenchmarkPopulateTogether maps and fills buffers of 75 MiB (a Loader's first, two reads of
// a batch of 256 records of 147 KiB) of clients that start together, each on a goroutine of
// its own as the daemon's connections are, with MADV_POPULATE_WRITE and with populate's
// MADV_POPULATE_READ, in populateChunk chunks, alternately (write first in even iterations);
// the metrics are the time from the common start to the last buffer filled, each way.
//
//	go test -run '^$' -bench PopulateTogether -benchtime 6x ./fs/
func BenchmarkPopulateTogether(b *testing.B) {
	const size = 75 << 20
	for _, n := range []int{1, 2, 8, 16} {
		b.Run(fmt.Sprintf("buffers=%d", n), func(b *testing.B) {
			var write, read time.Duration
			for i := range b.N {
				if i%2 == 0 {
					write += populateTogether(b, n, size, unix.MADV_POPULATE_WRITE)
				}
				read += populateTogether(b, n, size, unix.MADV_POPULATE_READ)
				if i%2 == 1 {
					write += populateTogether(b, n, size, unix.MADV_POPULATE_WRITE)
				}
			}
			b.ReportMetric(float64(write.Microseconds())/1e3/float64(b.N), "ms-write")
			b.ReportMetric(float64(read.Microseconds())/1e3/float64(b.N), "ms-read")
		})
	}
}

// populateTogether maps n new buffers of size bytes on n goroutines at once, fills them with
// advice, and returns the time until the last is mapped and filled.
func populateTogether(b *testing.B, n, size, advice int) time.Duration {
	b.StopTimer()
	fds := make([]int, n)
	for i := range fds {
		fds[i] = clientBuffer(b, size)
	}
	maps := make([][]byte, n)
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	b.StartTimer()
	start := time.Now() // all asked at once: a buffer's wait to be served counts
	for i := range fds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := unix.Mmap(fds[i], 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err == nil {
				populateWith(m, populateChunk, advice)
			}
			maps[i], took[i] = m, time.Since(start)
		}()
	}
	wg.Wait()
	b.StopTimer()
	var slowest time.Duration
	for i, m := range maps {
		slowest = max(slowest, took[i])
		if m != nil {
			unix.Munmap(m)
		}
		unix.Close(fds[i])
	}
	b.StartTimer()
	return slowest
}

// TestReserve: reserve adds within the bound and refuses past it, exactly, from many
// goroutines at once (the daemon's total of mapped buffers).
func TestReserve(t *testing.T) {
	var v atomic.Int64
	var wg sync.WaitGroup
	var took atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if reserve(&v, 7, 1000) {
					took.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(1000/7), took.Load())
	require.Equal(t, int64(1000/7*7), v.Load())
	require.False(t, reserve(&v, 7, 1000))
	require.True(t, reserve(&v, 6, 1000))
}
