package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestS3Faults serves a dataset through a proxy that breaks requests, and checks that every
// read returns the local mount's bytes or EIO, never other bytes: transient 503s, resets,
// truncated and damaged bodies and latency are retried away; a store that keeps failing, sends
// damaged bytes or never answers gives EIO in bounded time and the mount recovers when it is
// back; MinIO killed and restarted mid-epoch; objects replaced under the mount (EIO, "changed")
// and damaged at rest (EIO, "corrupt"); no goroutine growth.
func TestS3Faults(t *testing.T) {
	t.Parallel() // it mostly waits for the store's timeouts: beside the other tests that do (make test's -parallel)
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	proxy := startProxy(t, srv.addr)
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 8000, 0)
	ep := "--endpoint=" + proxy.endpoint()
	flags := []string{"--format", "raw", "--record-size", "1000", "--block-size", "256KiB", "--seed", "2"}
	local := filepath.Join(dir, "local")
	url := "s3://data/faults"
	mustRun(t, append(append([]string{"pack", "--quiet"}, flags...), raw, local)...)
	mustRun(t, append(append([]string{"pack", "--quiet", ep}, flags...), raw, url)...)

	ml := mount(t, local, "--seed", "1")
	logPath := filepath.Join(dir, "s3.log")
	// A cache of 4 MiB under 8 MB of data: each epoch goes back to the store.
	mr := mount(t, url, ep, "--seed", "1", "--cache-size", "4MiB", "--readahead", "512KiB",
		"--s3-concurrency", "2", "--s3-timeout", "2s", "--s3-retries", "3", "--log", logPath)
	want := func(name string) []byte {
		b, err := os.ReadFile(ml.path(name))
		require.NoError(t, err)
		return b
	}
	logText := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}
	const chunk = 1 << 20
	require.Zero(t, readAllOrEIO(t, mr.path("epoch-0000"), want("epoch-0000"), chunk))
	base := goroutines(t, mr)

	// Faults a retry mends: exact bytes, no EIO.
	retriedFaults(t, ml, mr, proxy)
	proxy.delay.Store(int64(20 * time.Millisecond))
	before := len(proxy.requests())
	require.Zero(t, readAllOrEIO(t, mr.path("epoch-0005"), want("epoch-0005"), chunk), "latency")
	require.Greater(t, len(proxy.requests()), before+5, "latency: the epoch was read from the store")
	proxy.clear()

	// Faults that outlast the retry budget: EIO in bounded time, then recovery.
	for i, fault := range []struct {
		name, log string
		set       func()
		bound     time.Duration
	}{
		{"persistent 503s", "object store unavailable", func() { proxy.err503.Store(-1) }, 20 * time.Second},
		{"damaged bodies", "corrupt dataset", func() { proxy.flip.Store(-1) }, 20 * time.Second},
		{"a store that never answers", "object store unavailable", func() { proxy.hang.Store(-1) }, 30 * time.Second},
	} {
		name := "epoch-000" + string(rune('6'+i))
		w := want(name)
		fault.set()
		readEIO(t, mr.path(name), fault.bound, fault.name)
		proxy.clear()
		proxy.settle(t) // a read joining a load from the outage would get its error
		require.Zero(t, readAllOrEIO(t, mr.path(name), w, chunk), "%s: after recovery", fault.name)
		require.Contains(t, logText(), fault.log, fault.name)
	}

	// Credentials refused under the mount (expired, revoked): EIO at once, not retried; the
	// reads after the store accepts them again get every byte.
	{
		name := "epoch-0011"
		w := want(name)
		proxy.deny.Store(-1)
		before := len(proxy.requests())
		took := readEIO(t, mr.path(name), 5*time.Second, "refused")
		require.Contains(t, logText(), "the object store refused access")
		t.Logf("refused: EIO in %v after %d requests", took, len(proxy.requests())-before)
		proxy.clear()
		require.Zero(t, readAllOrEIO(t, mr.path(name), w, chunk), "refused: after recovery")
	}

	// MinIO killed mid-epoch and started again: exact bytes or EIO while it is down, every
	// byte once it is back.
	name := "epoch-0009"
	w := want(name)
	// O_DIRECT: every read reaches the daemon. Through the page cache, the kernel's readahead
	// (up to 4 MiB) could hold the chunks after the kill already, and under load every read
	// until the restart came from it (1 full run in 5).
	f, err := os.OpenFile(mr.path(name), os.O_RDONLY|syscall.O_DIRECT, 0)
	require.NoError(t, err)
	buf := make([]byte, chunk)
	failed := 0
	down := false
	for i, off := 0, 0; off < len(w); i, off = i+1, off+chunk {
		if i == 2 {
			srv.kill()
			down = true
		}
		// Back once a read has failed (readahead may have fetched the next chunks before the
		// kill; the cache is smaller than the data, so a read that needs the store comes), or
		// for the last chunks.
		if down && (failed > 0 || off+2*chunk >= len(w)) {
			srv.start()
			down = false
		}
		k, err := f.ReadAt(buf, int64(off))
		if err != nil && k < min(chunk, len(w)-off) {
			require.ErrorIs(t, err, syscall.EIO, "read at %d", off)
			failed++
			continue
		}
		require.True(t, string(buf[:k]) == string(w[off:off+k]), "wrong bytes at %d", off)
	}
	f.Close()
	require.NotZero(t, failed, "reads while MinIO was down must have failed (the cache is smaller than the data)")
	require.Zero(t, readAllOrEIO(t, mr.path(name), w, chunk), "after MinIO restarted")

	// Goroutines back to where they were (idle connections come and go: a little slack).
	time.Sleep(time.Second)
	require.LessOrEqual(t, goroutines(t, mr), base+12, "goroutines grew")

	// Every object rewritten under the mount with other bytes of the same size: what is not
	// cached reads as EIO ("changed"), never the new bytes.
	keys := []string{}
	for oi := range srv.cl.ListObjects(t.Context(), "data", minioListAll("faults/blocks/")) {
		require.NoError(t, oi.Err)
		keys = append(keys, oi.Key)
	}
	require.NotEmpty(t, keys)
	for _, k := range keys {
		b := srv.get("data", k)
		b[len(b)/3] ^= 0xff
		srv.put("data", k, b)
	}
	name = "epoch-0010"
	require.NotZero(t, readAllOrEIO(t, mr.path(name), want(name), chunk))
	require.Contains(t, logText(), "changed under the mount")
	require.Contains(t, logText(), "ETag")

	// A new mount sees the damaged objects as they are now: their CRC32C fails, so EIO.
	log2 := filepath.Join(dir, "s3-2.log")
	m2 := mount(t, url, ep, "--seed", "1", "--cache-size", "4MiB", "--readahead", "512KiB", "--log", log2)
	f, err = os.Open(m2.path("epoch-0000"))
	require.NoError(t, err)
	_, err = f.ReadAt(buf, 0)
	f.Close()
	require.ErrorIs(t, err, syscall.EIO)
	b, _ := os.ReadFile(log2)
	require.Contains(t, string(b), "corrupt dataset")
	require.Contains(t, string(b), "CRC32C")
	// One log line per failed read, each naming the object.
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(line, "corrupt dataset") {
			require.Contains(t, line, "s3://data/faults/blocks/")
		}
	}
}

// TestS3Unreachable: a mount of a store nobody answers at fails in bounded time with one line.
func TestS3Unreachable(t *testing.T) {
	requireFUSE(t)
	t.Setenv("AWS_ACCESS_KEY_ID", minioUser)
	t.Setenv("AWS_SECRET_ACCESS_KEY", minioPass)
	start := time.Now()
	_, errs, code := run(t, "mount", "--endpoint", "http://"+freeAddr(t), "--s3-timeout", "1s", "--s3-retries", "2",
		"s3://data/x", t.TempDir())
	require.Equal(t, 1, code, errs)
	require.Less(t, time.Since(start), 15*time.Second)
	require.Contains(t, errs, "store unavailable")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
}

// goroutines reads the daemon's goroutine count from .blockfs/stats.json.
func goroutines(t *testing.T, m *mounted) int {
	b, err := os.ReadFile(m.path(".blockfs/stats.json"))
	require.NoError(t, err)
	var st struct {
		Goroutines int `json:"goroutines"`
	}
	require.NoError(t, json.Unmarshal(b, &st))
	require.NotZero(t, st.Goroutines)
	return st.Goroutines
}
