package test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

// TestMetricsIdleConnections: any local user can connect to --metrics. 1000 connections that
// each send one scrape and then idle, kept alive, against a daemon whose open-file limit is
// 256 must leave it the descriptors its reads need: a whole epoch reads back byte for byte
// while they are open, a scrape is served while they idle, and another once they are gone.
// (Without a cap or idle timeout, about 240 such connections took every descriptor, and each
// read of a block file failed with EMFILE.)
func TestMetricsIdleConnections(t *testing.T) {
	const n = 1024
	p := packRaw(t, n, "64KiB")
	limited := filepath.Join(t.TempDir(), "blockfs-ulimit-256")
	require.NoError(t, os.WriteFile(limited, []byte("#!/bin/sh\nulimit -n 256 || exit 1\nexec "+bin+" \"$@\"\n"), 0o755))
	addr := freeAddr(t)
	m := mountBinary(t, limited, p.dir, t.TempDir(), "--metrics", addr, "--seed", "5", "--mix", "1",
		"--cache-size", "4MiB", "--readahead", "0")
	limit := procLimit(t, m.cmd.Process.Pid)
	require.Equal(t, "256", limit, "the daemon runs under ulimit -n 256")

	conns, served := idleScrapes(t, addr, 1000)
	t.Logf("1000 connections: %d scrapes answered; the daemon holds %d descriptors", served, openFDs(t, m.cmd.Process.Pid))

	d := dstest.FromDir(t, p.dir, p.records)
	want, _, _ := d.Epoch(shuffle.Options{Seed: 5, Epoch: 0, Mode: shuffle.Full, Mix: 1}, 0, n)
	got, err := os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err, "the epoch reads while 1000 metrics connections are open: %s", tail(m.stderr.String()))
	require.Equal(t, sum(want), sum(got), "epoch-0000 byte for byte")
	assert.Less(t, openFDs(t, m.cmd.Process.Pid), 128, "the metrics connections hold well under the limit")

	assert.Contains(t, scrapeText(t, addr), "blockfs_read_bytes_total", "a scrape while 1000 connections idle")
	for _, c := range conns {
		c.Close()
	}
	assert.Contains(t, scrapeText(t, addr), "blockfs_read_bytes_total", "a scrape once they are gone")
	got, err = os.ReadFile(m.path("epoch-0000"))
	require.NoError(t, err)
	require.Equal(t, sum(want), sum(got))
}

// idleScrapes opens k connections to addr at once; each sends one scrape, reads the answer if
// one comes within 5 s, and is left open (kept alive). It returns them and how many scrapes
// were answered.
func idleScrapes(t *testing.T, addr string, k int) ([]net.Conn, int64) {
	t.Helper()
	conns := make([]net.Conn, k)
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	var served atomic.Int64
	var wg sync.WaitGroup
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err, "connection %d", i)
		conns[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, resp.Body); err == nil && resp.StatusCode == http.StatusOK {
				served.Add(1)
			}
			resp.Body.Close()
			c.SetDeadline(time.Time{})
		}()
	}
	wg.Wait()
	return conns, served.Load()
}

// scrapeText GETs http://addr/metrics on a new connection and returns the body.
func scrapeText(t *testing.T, addr string) string {
	t.Helper()
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}

// procLimit returns the soft "Max open files" of process pid.
func procLimit(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			return strings.Fields(strings.TrimPrefix(line, "Max open files"))[0]
		}
	}
	t.Fatalf("no Max open files in /proc/%d/limits", pid)
	return ""
}

// openFDs returns how many descriptors process pid holds.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	return len(ents)
}

// tail returns the last 2000 bytes of a daemon's log.
func tail(s string) string { return s[max(0, len(s)-2000):] }
