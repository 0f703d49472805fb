package test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	return findServer(t, "fake-gcs-server", "scripts/fakegcs.sh", "BLOCKFS_FAKE_GCS", "",
		os.Getenv("BLOCKFS_FAKE_GCS"), "/var/cache/blockfs/fake-gcs-bin/fake-gcs-server")
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
	t.Parallel() // it mostly waits for the store's answers and timeouts: beside the other tests that do (make test's -parallel)
	srv := startGCS(t, "data")
	dir := t.TempDir()
	raw, folder := s3Sources(t, dir, 6000, 300)
	ep := "--endpoint=" + srv.endpoint()
	for _, c := range storePacks(raw, folder, dir) {
		t.Run(c.name, func(t *testing.T) {
			local, u := filepath.Join(dir, c.name), "gs://data/sets/"+c.name
			packToStore(t, c, local, u, ep)
			storeMatchesLocal(t, c, local, u, ep)
		})
	}
	// Every block object rewritten under a mount: a new generation.
	replacedUnderMount(t, filepath.Join(dir, "fixed"), "gs://data/sets/fixed", []string{ep}, func() {
		keys := srv.objects("data", "sets/fixed/blocks/")
		require.NotEmpty(t, keys)
		for _, k := range keys {
			b := srv.get("data", k)
			b[len(b)/3] ^= 0xff
			srv.put("data", k, b)
		}
	})
}

// TestGCSFaults: the emulator behind the tests' fault proxy (checkStoreFaults).
func TestGCSFaults(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // it mostly waits for the store's answers and timeouts: beside the other tests that do (make test's -parallel)
	srv := startGCS(t, "data")
	proxy := startProxy(t, srv.addr)
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 8000, 0)
	ep := "--endpoint=" + proxy.endpoint()
	flags := []string{"--format", "raw", "--record-size", "1000", "--block-size", "256KiB", "--seed", "2"}
	local := filepath.Join(dir, "local")
	mustRun(t, append(append([]string{"pack", "--quiet"}, flags...), raw, local)...)
	mustRun(t, append(append([]string{"pack", "--quiet", ep}, flags...), raw, "gs://data/faults")...)
	checkStoreFaults(t, mount(t, local, "--seed", "1"), mount(t, "gs://data/faults", append([]string{ep}, faultsFlags...)...), proxy)
}
