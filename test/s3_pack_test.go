package test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"
)

// TestS3PackStreams packs 24 MiB in 256 KiB blocks to MinIO with TMPDIR pointing at a
// directory whose size is sampled during the pack: each block is uploaded and deleted as soon
// as it is written, so the scratch (the pre-shuffle's spill aside) stays far below the dataset.
// The result verifies and matches a local pack's info; an interrupted pack leaves no manifest
// and removes what it uploaded.
func TestS3PackStreams(t *testing.T) {
	srv := startMinio(t)
	srv.bucket("data")
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 24<<10, 0) // 24,576 records of 1000 bytes
	ep := "--endpoint=" + srv.endpoint()
	const dataset = 24 << 10 * 1000
	for _, c := range []struct {
		name  string
		flags []string
	}{
		{"in-order", []string{"--no-shuffle"}},
		{"shuffled", []string{"--seed", "5"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			flags := append([]string{"--quiet", "--format", "raw", "--record-size", "1000", "--block-size", "256KiB"}, c.flags...)
			url := "s3://data/stream/" + c.name
			scratch := t.TempDir()
			cmd := packCmd(scratch, append(append([]string{"pack", ep}, flags...), raw, url)...)
			peak, spill := sampleScratch(t, scratch, cmd)
			t.Logf("%s: peak scratch %d bytes (blocks and the rest), %d with the pre-shuffle's spill; dataset %d bytes", c.name, peak, spill, dataset)
			require.Less(t, peak, int64(dataset/4), "scratch held %d bytes of a %d-byte dataset", peak, dataset)
			require.LessOrEqual(t, peak, int64((2*8+2)*256<<10), "more than the queued and uploading blocks")
			ents, err := os.ReadDir(scratch)
			require.NoError(t, err)
			require.Empty(t, ents, "pack left scratch files behind")

			require.Contains(t, mustRun(t, "verify", ep, url), url+": ok")
			local := filepath.Join(dir, c.name+"-local")
			mustRun(t, append(append([]string{"pack"}, flags...), raw, local)...)
			require.Equal(t, strings.ReplaceAll(mustRun(t, "info", local), local, url), mustRun(t, "info", ep, url))
		})
	}

	t.Run("interrupted", func(t *testing.T) {
		scratch := t.TempDir()
		cmd := packCmd(scratch, "pack", ep, "--quiet", "--no-shuffle", "--s3-concurrency", "1",
			"--format", "raw", "--record-size", "1000", "--block-size", "64KiB", raw, "s3://data/stream/cut")
		require.NoError(t, cmd.Start())
		uploaded := func() int { return len(listKeys(t, srv, "stream/cut/")) }
		deadline := time.Now().Add(20 * time.Second)
		for uploaded() == 0 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		err := cmd.Wait()
		require.Error(t, err, "the pack finished before it was interrupted")
		require.Empty(t, listKeys(t, srv, "stream/cut/"), "an interrupted pack left objects")
		ents, err := os.ReadDir(scratch)
		require.NoError(t, err)
		require.Empty(t, ents, "pack left scratch files behind")
	})
}

// TestS3PackUploadFails: the store fails an upload mid-pack for longer than the retries
// (503s through the fault proxy): pack exits 1 with one line naming the object, writes no
// manifest, removes the blocks it had uploaded and its scratch files; once the store is well,
// the same pack (no --force: there is no dataset there) succeeds and verifies.
func TestS3PackUploadFails(t *testing.T) {
	srv := startMinio(t)
	srv.bucket("data")
	proxy := startProxy(t, srv.addr)
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 4<<10, 0)
	ep := "--endpoint=" + proxy.endpoint()
	args := []string{"pack", ep, "--quiet", "--no-shuffle", "--s3-concurrency", "1", "--s3-retries", "1",
		"--format", "raw", "--record-size", "1000", "--block-size", "64KiB", raw, "s3://data/failing"}
	puts := func() int {
		n := 0
		for _, r := range proxy.requests() {
			if strings.HasPrefix(r, "PUT /data/failing/") {
				n++
			}
		}
		return n
	}
	scratch := t.TempDir()
	cmd := packCmd(scratch, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	proxy.delay.Store(int64(5 * time.Millisecond)) // room to step in after a few uploads
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(20 * time.Second)
	for puts() < 6 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	proxy.err503.Store(2) // the next upload's first try and its one retry
	err := cmd.Wait()
	proxy.clear()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the pack did not fail: %s", errb.String())
	require.Equal(t, 1, ee.ExitCode(), errb.String())
	msg := errb.String()
	t.Logf("pack after %d uploads: %s", puts(), strings.TrimSpace(msg))
	require.Equal(t, 1, strings.Count(msg, "\n"), "one line: %q", msg)
	require.Contains(t, msg, "s3://data/failing/blocks/")
	require.Contains(t, msg, "store unavailable")
	require.Empty(t, listKeys(t, srv, "failing/"), "a failed pack left objects (or a manifest)")
	ents, err := os.ReadDir(scratch)
	require.NoError(t, err)
	require.Empty(t, ents, "pack left scratch files behind")

	mustRun(t, args...)
	require.Contains(t, mustRun(t, "verify", ep, "s3://data/failing"), "s3://data/failing: ok")
}

// packCmd is `blockfs ARGS` with TMPDIR=scratch.
func packCmd(scratch string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+scratch)
	return cmd
}

// sampleScratch runs cmd, sampling the bytes of the files under scratch every millisecond,
// and returns the peak without the pre-shuffle's spill (a "scatter" directory) and with it.
func sampleScratch(t *testing.T, scratch string, cmd *exec.Cmd) (int64, int64) {
	var errb bytes.Buffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	var peak, spill atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var rest, all int64
			_ = filepath.WalkDir(scratch, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return nil
				}
				st, err := d.Info()
				if err != nil {
					return nil
				}
				all += st.Size()
				if !strings.Contains(p, "/scatter/") {
					rest += st.Size()
				}
				return nil
			})
			peak.Store(max(peak.Load(), rest))
			spill.Store(max(spill.Load(), all))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	close(stop)
	<-done
	require.NoError(t, err, errb.String())
	return peak.Load(), spill.Load()
}

// listKeys lists the object keys under prefix in bucket data.
func listKeys(t *testing.T, srv *minioServer, prefix string) []string {
	var keys []string
	for oi := range srv.cl.ListObjects(context.Background(), "data", minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		require.NoError(t, oi.Err)
		keys = append(keys, oi.Key)
	}
	return keys
}
