package test

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// webRoot serves the files under root as a static host does: ranges, Last-Modified, and a
// strong ETag (size and modification time) unless noETag, so that a version is pinned either
// way.
type webRoot struct {
	root   string
	noETag atomic.Bool
}

func (s *webRoot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := filepath.Join(s.root, filepath.FromSlash(filepath.Clean("/"+r.URL.Path)))
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	if !s.noETag.Load() {
		w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, st.Size(), st.ModTime().UnixNano()))
	}
	http.ServeFile(w, r, p)
}

// startWeb serves root over HTTPS with httptest's certificate, which the blockfs processes the
// tests start trust (trustTestServers); it returns the server's https:// URL.
func startWeb(t *testing.T, h http.Handler) string {
	ts := httptest.NewTLSServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// trustTestServers writes the certificate every httptest TLS server presents (one, built into
// net/http/httptest) to dir and points SSL_CERT_FILE there for the whole run: the blockfs
// processes the tests start trust the tests' web servers and no other, and no test sets the
// variable itself, so that tests of web servers may run in parallel.
func trustTestServers(dir string) error {
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	pemPath := filepath.Join(dir, "test-servers.pem")
	if err := os.WriteFile(pemPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644); err != nil {
		return err
	}
	return os.Setenv("SSL_CERT_FILE", pemPath)
}

// TestWebMountMatchesLocal publishes packed datasets on a web server (HTTPS, a certificate of
// its own) and mounts them by URL: the epochs, sidecars and names are the local mount's byte
// for byte, with and without ETags, with --disk-cache, compressed; info and verify read the
// URL; pack to a URL is refused in one line; an object replaced under the mount reads as EIO,
// never its new bytes.
func TestWebMountMatchesLocal(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // it mostly waits for the store's answers and timeouts: beside the other tests that do (make test's -parallel)
	dir := t.TempDir()
	raw, folder := s3Sources(t, dir, 6000, 300)
	root := filepath.Join(dir, "www")
	sets := filepath.Join(root, "sets")
	require.NoError(t, os.MkdirAll(sets, 0o755))
	mustRun(t, "pack", "--quiet", "--format", "raw", "--record-size", "1000", "--block-size", "256KiB", "--seed", "5", raw, filepath.Join(sets, "fixed"))
	mustRun(t, "pack", "--quiet", "--block-size", "128KiB", "--seed", "9", folder, filepath.Join(sets, "files"))
	mustRun(t, "pack", "--quiet", "--block-size", "128KiB", "--compress", "zstd", folder, filepath.Join(sets, "files-z"))
	srv := &webRoot{root: root}
	base := startWeb(t, srv)

	for _, c := range []struct {
		storePack
		noETag bool
	}{
		{storePack{name: "fixed", files: []string{"epoch-0000.ids", "shard-1-of-3/epoch-0002"}}, false},
		{storePack{name: "files", files: []string{"epoch-0000.offsets", "epoch-0001.ids", ".blockfs/names.txt"}}, true},
		{storePack{name: "files-z", mount: []string{"--disk-cache", filepath.Join(dir, "dc")}, files: []string{"epoch-0000.offsets"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv.noETag.Store(c.noETag)
			ml, mr := storeMatchesLocal(t, c.storePack, filepath.Join(sets, c.name), base+"/sets/"+c.name)
			sum := func(p string) string {
				return strings.Fields(sh(t, "dd if="+p+" bs=1M status=none | sha256sum"))[0]
			}
			require.Equal(t, sum(ml.path("epoch-0004")), sum(mr.path("epoch-0004")))
		})
	}

	// Packing to a URL: refused in one line, nothing written.
	_, errs, code := run(t, "pack", "--quiet", "--format", "raw", "--record-size", "1000", raw, base+"/sets/new")
	require.NotEqual(t, 0, code)
	require.Contains(t, errs, "read-only")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
	require.NoDirExists(t, filepath.Join(sets, "new"))

	// A block replaced under the mount with other bytes of its size (and a later mtime).
	srv.noETag.Store(false)
	local := filepath.Join(sets, "fixed")
	blocks, err := filepath.Glob(filepath.Join(local, "blocks", "*"))
	require.NoError(t, err)
	require.NotEmpty(t, blocks)
	saved := map[string][]byte{}
	replacedUnderMount(t, local, base+"/sets/fixed", nil, func() {
		for _, b := range blocks {
			data, err := os.ReadFile(b)
			require.NoError(t, err)
			saved[b] = slices.Clone(data)
			data[len(data)/3] ^= 0xff
			require.NoError(t, os.WriteFile(b, data, 0o644))
			require.NoError(t, os.Chtimes(b, time.Now(), time.Now().Add(time.Hour)))
		}
	})
	for b, data := range saved {
		require.NoError(t, os.WriteFile(b, data, 0o644))
	}
}

// TestWebFaults: a web server behind the tests' fault proxy (plain http://, the same code as
// https://): 503s, resets and cut bodies are retried to the exact bytes; a server that stops
// answering gives EIO in bounded time, and the reads after it recovers every byte.
func TestWebFaults(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // it mostly waits for the store's answers and timeouts: beside the other tests that do (make test's -parallel)
	dir := t.TempDir()
	raw, _ := s3Sources(t, dir, 8000, 0)
	root := filepath.Join(dir, "www")
	local := filepath.Join(root, "faults")
	require.NoError(t, os.MkdirAll(root, 0o755))
	mustRun(t, "pack", "--quiet", "--format", "raw", "--record-size", "1000", "--block-size", "256KiB", "--seed", "2", raw, local)
	ts := httptest.NewServer(&webRoot{root: root})
	t.Cleanup(ts.Close)
	proxy := startProxy(t, strings.TrimPrefix(ts.URL, "http://"))
	url := proxy.endpoint() + "/faults"

	logPath := filepath.Join(dir, "web.log")
	checkStoreFaults(t, mount(t, local, "--seed", "1"), mount(t, url, append(slices.Clone(faultsFlags), "--log", logPath)...), proxy)
	logText, _ := os.ReadFile(logPath)
	require.Contains(t, string(logText), "unavailable")
}
