package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Google Cloud Storage tests run against fake-gcs-server, an independent emulator of the
// JSON API (a Go module), built once per machine by scripts/fakegcs.sh (make test passes its
// path in BLOCKFS_FAKE_GCS).

// fakeGCSBinary finds the emulator: $BLOCKFS_FAKE_GCS, else where scripts/fakegcs.sh puts it.
// Missing, the test skips, or fails when BLOCKFS_REQUIRE_FUSE=1 (CI never passes by skipping).
func fakeGCSBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("BLOCKFS_FAKE_GCS"), "/var/cache/blockfs/fake-gcs-bin/fake-gcs-server"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
		t.Fatal("fake-gcs-server is missing: run scripts/fakegcs.sh and set BLOCKFS_FAKE_GCS (make test does both)")
	}
	t.Skip("fake-gcs-server is missing: run scripts/fakegcs.sh and set BLOCKFS_FAKE_GCS")
	return ""
}

// gcsServer is fake-gcs-server on a free port of 127.0.0.1, its buckets in memory, stopped
// when the test ends.
type gcsServer struct {
	t    *testing.T
	addr string
}

// startGCS starts the emulator with the given buckets.
func startGCS(t *testing.T, buckets ...string) *gcsServer {
	t.Helper()
	data := t.TempDir()
	for _, b := range buckets {
		require.NoError(t, os.MkdirAll(filepath.Join(data, b), 0o755))
	}
	s := &gcsServer{t: t, addr: freeAddr(t)}
	host, port, _ := strings.Cut(s.addr, ":")
	var log strings.Builder
	cmd := exec.Command(fakeGCSBinary(t), "-scheme", "http", "-host", host, "-port", port, "-backend", "memory",
		"-data", data, "-public-host", s.addr, "-log-level", "error")
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.Env = append(os.Environ(), "GOMAXPROCS=2")
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.endpoint() + "/storage/v1/b")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-done:
			t.Fatalf("fake-gcs-server exited before it was ready: %s", log.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "fake-gcs-server not ready after 30 s: %s", log.String())
		time.Sleep(50 * time.Millisecond)
	}
	// Google's libraries, and blockfs, find an emulator by this variable; the tests name it
	// with --endpoint instead, so that the fault proxy can sit in between.
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	return s
}

func (s *gcsServer) endpoint() string { return "http://" + s.addr }

// put stores data as the object key of bucket (a new generation).
func (s *gcsServer) put(bucket, key string, data []byte) {
	u := s.endpoint() + "/upload/storage/v1/b/" + bucket + "/o?uploadType=media&name=" + url.QueryEscape(key)
	resp, err := http.Post(u, "application/octet-stream", bytes.NewReader(data))
	require.NoError(s.t, err)
	resp.Body.Close()
	require.Equal(s.t, 200, resp.StatusCode)
}

// objects lists the keys under prefix.
func (s *gcsServer) objects(bucket, prefix string) []string {
	resp, err := http.Get(s.endpoint() + "/storage/v1/b/" + bucket + "/o?prefix=" + url.QueryEscape(prefix))
	require.NoError(s.t, err)
	defer resp.Body.Close()
	var page struct {
		Items []struct{ Name string } `json:"items"`
	}
	require.NoError(s.t, json.NewDecoder(resp.Body).Decode(&page))
	var out []string
	for _, it := range page.Items {
		out = append(out, it.Name)
	}
	return out
}

// get returns the object key of bucket.
func (s *gcsServer) get(bucket, key string) []byte {
	resp, err := http.Get(s.endpoint() + "/storage/v1/b/" + bucket + "/o/" + url.PathEscape(key) + "?alt=media")
	require.NoError(s.t, err)
	defer resp.Body.Close()
	require.Equal(s.t, 200, resp.StatusCode)
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	require.NoError(s.t, err)
	return b.Bytes()
}

// TestGCSMountMatchesLocal packs the same inputs into a local directory and into the GCS
// emulator, and mounts both: the epochs, sidecars and names are the same byte for byte
// (fixed-size records; variable ones, compressed, with --disk-cache); verify and info read
// gs://; a second pack is refused without --force and replaces with it; an object replaced
// under the mount (a new generation) reads as EIO, never as its new bytes.
func TestGCSMountMatchesLocal(t *testing.T) {
	requireFUSE(t)
	srv := startGCS(t, "data")
	dir := t.TempDir()
	raw, folder := s3Sources(t, dir, 6000, 300)
	ep := "--endpoint=" + srv.endpoint()
	for _, c := range []struct {
		name  string
		src   string
		flags []string
		mount []string
		files []string
	}{
		{"fixed", raw, []string{"--format", "raw", "--record-size", "1000", "--block-size", "256KiB", "--seed", "5"}, nil,
			[]string{"epoch-0000.ids", "shard-1-of-3/epoch-0002"}},
		{"files-z", folder, []string{"--block-size", "128KiB", "--seed", "9", "--compress", "zstd"},
			[]string{"--disk-cache", filepath.Join(dir, "dc")}, []string{"epoch-0000.offsets", ".blockfs/names.txt"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			local, u := filepath.Join(dir, c.name), "gs://data/sets/"+c.name
			mustRun(t, append(append([]string{"pack", "--quiet"}, c.flags...), c.src, local)...)
			mustRun(t, append(append([]string{"pack", "--quiet", ep}, c.flags...), c.src, u)...)
			_, errs, code := run(t, append(append([]string{"pack", "--quiet", ep}, c.flags...), c.src, u)...)
			require.Equal(t, 1, code, errs)
			require.Contains(t, errs, "--force")
			mustRun(t, append(append([]string{"pack", "--quiet", "--force", ep}, c.flags...), c.src, u)...)
			require.Contains(t, mustRun(t, "verify", ep, u), u+": ok")
			require.Equal(t, strings.ReplaceAll(mustRun(t, "info", local), local, u), mustRun(t, "info", ep, u))
			ml := mount(t, local, "--seed", "3")
			mr := mount(t, u, append([]string{ep, "--seed", "3"}, c.mount...)...)
			for _, name := range append([]string{"epoch-0000", "epoch-0001", "epoch-0007"}, c.files...) {
				want, err := os.ReadFile(ml.path(name))
				require.NoError(t, err, name)
				require.NotEmpty(t, want, name)
				got, err := os.ReadFile(mr.path(name))
				require.NoError(t, err, name)
				require.True(t, slices.Equal(want, got), "%s differs between the local and the gs:// mount", name)
			}
		})
	}

	// Every block object rewritten under a mount (a new generation, other bytes of the same
	// size): EIO, never the new bytes.
	local := filepath.Join(dir, "fixed")
	logPath := filepath.Join(dir, "gcs.log")
	ml := mount(t, local, "--seed", "1")
	mr := mount(t, "gs://data/sets/fixed", ep, "--seed", "1", "--cache-size", "4MiB", "--readahead", "512KiB", "--log", logPath)
	want, err := os.ReadFile(ml.path("epoch-0002"))
	require.NoError(t, err)
	keys := srv.objects("data", "sets/fixed/blocks/")
	require.NotEmpty(t, keys)
	for _, k := range keys {
		b := srv.get("data", k)
		b[len(b)/3] ^= 0xff
		srv.put("data", k, b)
	}
	require.NotZero(t, readAllOrEIO(t, mr.path("epoch-0002"), want, 1<<20))
	logText, _ := os.ReadFile(logPath)
	require.Contains(t, string(logText), "changed under the mount")
}

// TestGCSFaults: the emulator behind the tests' fault proxy: 503s, resets and cut bodies are
// retried to the exact bytes; an emulator that stops answering gives EIO in bounded time, and
// the reads after it recovers get every byte.
func TestGCSFaults(t *testing.T) {
	requireFUSE(t)
	srv := startGCS(t, "data")
	proxy := startProxy(t, srv.addr)
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 8000, 0)
	ep := "--endpoint=" + proxy.endpoint()
	flags := []string{"--format", "raw", "--record-size", "1000", "--block-size", "256KiB", "--seed", "2"}
	local := filepath.Join(dir, "local")
	mustRun(t, append(append([]string{"pack", "--quiet"}, flags...), raw, local)...)
	mustRun(t, append(append([]string{"pack", "--quiet", ep}, flags...), raw, "gs://data/faults")...)
	ml := mount(t, local, "--seed", "1")
	mr := mount(t, "gs://data/faults", ep, "--seed", "1", "--cache-size", "4MiB", "--readahead", "512KiB",
		"--s3-concurrency", "2", "--s3-timeout", "2s", "--s3-stall-timeout", "1s", "--s3-retries", "3", "--log", filepath.Join(dir, "gcs.log"))
	want := func(name string) []byte {
		b, err := os.ReadFile(ml.path(name))
		require.NoError(t, err)
		return b
	}
	const chunk = 1 << 20
	require.Zero(t, readAllOrEIO(t, mr.path("epoch-0000"), want("epoch-0000"), chunk))
	for i, fault := range []struct {
		name string
		c    *atomic.Int64
		n    int64
	}{
		{"503s", &proxy.err503, 3},
		{"resets", &proxy.reset, 3},
		{"truncated bodies", &proxy.truncate, 3},
		{"a damaged body", &proxy.flip, 1},
	} {
		fault.c.Store(fault.n)
		name := fmt.Sprintf("epoch-%04d", i+1)
		require.Zero(t, readAllOrEIO(t, mr.path(name), want(name), chunk), fault.name)
		require.Zero(t, fault.c.Load(), "%s: the faults were not all met (nothing read from the store?)", fault.name)
		proxy.clear()
	}
	name := "epoch-0006"
	w := want(name)
	proxy.hang.Store(-1)
	f, err := os.Open(mr.path(name))
	require.NoError(t, err)
	start := time.Now()
	_, err = f.ReadAt(make([]byte, chunk), 0)
	took := time.Since(start)
	f.Close()
	require.ErrorIs(t, err, syscall.EIO, "an emulator that never answers")
	require.Less(t, took, 30*time.Second, "EIO took %v", took)
	proxy.clear()
	require.Zero(t, readAllOrEIO(t, mr.path(name), w, chunk), "after recovery")
}
