package test

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

var (
	raceBinOnce sync.Once
	raceBin     string
	raceBinErr  error
)

// raceBinary builds blockfs with the race detector, once.
func raceBinary(t *testing.T) string {
	raceBinOnce.Do(func() {
		raceBin = filepath.Join(filepath.Dir(bin), "blockfs-race")
		_, self, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-race", "-o", raceBin, "./cmd/blockfs")
		cmd.Dir = filepath.Dir(filepath.Dir(self))
		if out, err := cmd.CombinedOutput(); err != nil {
			raceBinErr = fmt.Errorf("building blockfs -race: %v\n%s", err, out)
		}
	})
	require.NoError(t, raceBinErr)
	return raceBin
}

// soakFile is one file a soak reader may read, with its expected bytes.
type soakFile struct {
	path string
	want []byte
}

// TestSoak runs 16 concurrent readers on mixed epochs, shards and sidecars of a fixed and a
// variable-length dataset, with random preads and sequential reads, against a daemon built
// with the race detector, and checks every byte. BLOCKFS_SOAK_SECONDS sets the length
// (default 60; longer soaks by hand). The daemon must report no race, keep its goroutines flat
// and exit 0. It runs beside TestHungMountCommands, which mostly waits for the kernel's
// attribute timeout, and the store tests that mostly wait for the store's timeouts (all
// parallel, so after every other test; make test runs 6 at a time): minutes of make test's saved.
func TestSoak(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	seconds := 60
	if s := os.Getenv("BLOCKFS_SOAK_SECONDS"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "BLOCKFS_SOAK_SECONDS")
		seconds = v
	}
	race := raceBinary(t)
	fixed := dstest.Fixed(t, filepath.Join(t.TempDir(), "fixed"), 6000, 512, 64<<10, true)
	r0 := rand.New(rand.NewSource(9))
	lengths := make([]int, 4000)
	for i := range lengths {
		lengths[i] = r0.Intn(1500)
	}
	variable := dstest.Variable(t, filepath.Join(t.TempDir(), "variable"), lengths, 64<<10, true)

	type setup struct {
		d    *dstest.Dataset
		args []string
		opt  shuffle.Options
	}
	var files []soakFile
	var mounts []*mounted
	for _, s := range []setup{
		{fixed, []string{"--seed", "3", "--mix", "2"}, shuffle.Options{Seed: 3, Mode: shuffle.Full, Mix: 2}},
		{variable, []string{"--seed", "4"}, shuffle.Options{Seed: 4, Mode: shuffle.Full, Mix: 1}},
	} {
		m := mountBinary(t, race, s.d.Dir, t.TempDir(), append(s.args, "--cache-size", "4MiB", "--readahead", "512KiB")...)
		mounts = append(mounts, m)
		n := uint64(len(s.d.Source))
		for epoch := uint64(0); epoch < 3; epoch++ {
			opt := s.opt
			opt.Epoch = epoch
			for _, w := range []uint64{1, 2, 4, 8} {
				for r := uint64(0); r < w; r += 3 {
					start, end := dstest.Shard(n, r, w)
					data, ids, offs := s.d.Epoch(opt, start, end)
					dir := m.dir
					if w > 1 {
						dir = filepath.Join(m.dir, fmt.Sprintf("shard-%d-of-%d", r, w))
					}
					name := filepath.Join(dir, fmt.Sprintf("epoch-%04d", epoch))
					files = append(files, soakFile{name, data}, soakFile{name + ".ids", ids})
					if s.d == variable {
						files = append(files, soakFile{name + ".offsets", offs})
					}
				}
			}
		}
	}
	before := readStats(t, mounts[0])

	var reads, bytesRead atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Duration(seconds) * time.Second)
	// Drop the kernel's page cache now and then, so reads keep reaching the daemon instead of
	// being served from the cached epoch files.
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		for time.Now().Before(stop) {
			_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0)
			time.Sleep(250 * time.Millisecond)
		}
	}()
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for time.Now().Before(stop) {
				f := files[rng.Intn(len(files))]
				if err := soakRead(rng, f, &reads, &bytesRead); err != nil {
					errs <- fmt.Errorf("reader %d: %w", g, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	<-dropped
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	after := readStats(t, mounts[0])
	served := after["read_requests"] + readStats(t, mounts[1])["read_requests"]
	t.Logf("%d reads, %d MiB checked in %d s over %d files; the daemons answered %.0f FUSE reads; goroutines %v -> %v",
		reads.Load(), bytesRead.Load()>>20, seconds, len(files), served, before["goroutines"], after["goroutines"])
	assert.Positive(t, served)
	assert.LessOrEqual(t, after["goroutines"], before["goroutines"]+64, "goroutines do not grow without bound")
	for _, m := range mounts {
		// The race detector's shadow memory makes RSS meaningless here; the RSS bound is
		// asserted by TestDaemonMemoryBounded and TestBillionRecordsInPlace.
		t.Logf("race-built daemon peak RSS %d KiB (cache 4 MiB)", peakRSS(t, m.cmd.Process.Pid))
		m.stop() // requires exit 0: the race detector exits 66 on a race
		assert.NotContains(t, m.stderr.String(), "DATA RACE")
	}
}

// soakRead reads f once, either sequentially in random-sized chunks or with random preads,
// and compares with the expected bytes.
func soakRead(rng *rand.Rand, f soakFile, reads, total *atomic.Int64) error {
	fh, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer fh.Close()
	if rng.Intn(4) == 0 {
		var got bytes.Buffer
		buf := make([]byte, 1+rng.Intn(256<<10))
		for {
			n, err := fh.Read(buf)
			got.Write(buf[:n])
			reads.Add(1)
			if n == 0 || err != nil {
				break
			}
		}
		total.Add(int64(got.Len()))
		if !bytes.Equal(got.Bytes(), f.want) {
			return fmt.Errorf("%s: sequential read differs (%d bytes, want %d)", f.path, got.Len(), len(f.want))
		}
		return nil
	}
	for i := 0; i < 20 && len(f.want) > 0; i++ {
		off := rng.Int63n(int64(len(f.want)))
		buf := make([]byte, 1+rng.Intn(64<<10))
		n, _ := fh.ReadAt(buf, off)
		reads.Add(1)
		total.Add(int64(n))
		want := f.want[off:min(off+int64(len(buf)), int64(len(f.want)))]
		if !bytes.Equal(buf[:n], want) {
			return fmt.Errorf("%s: pread of %d at %d differs (%d bytes)", f.path, len(buf), off, n)
		}
	}
	return nil
}
