package test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"
)

// The object store tests run against a real MinIO server, built once per machine by
// scripts/minio.sh (make test and .ci/run call it and pass its path in BLOCKFS_MINIO).

const (
	minioUser = "blockfs-test"
	minioPass = "blockfs-test-secret"
)

// minioBinary finds the MinIO server: $BLOCKFS_MINIO, else where scripts/minio.sh puts it.
// Missing, the test skips, or fails when BLOCKFS_REQUIRE_FUSE=1 (CI never passes by skipping).
func minioBinary(t *testing.T) string {
	cands := []string{os.Getenv("BLOCKFS_MINIO"), "/var/cache/blockfs/minio-bin/minio"}
	if home, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(home, ".cache/blockfs/minio-bin/minio"))
	}
	return findServer(t, "MinIO", "scripts/minio.sh", "BLOCKFS_MINIO", "", cands...)
}

// findServer returns the first of paths (empty ones skipped) where a test server is: the
// executable file itself, or, with within, a directory holding the file within. Without one
// the test fails under BLOCKFS_REQUIRE_FUSE=1 (make test and CI install them all) and skips
// otherwise, saying how to get it: script, which make test runs, and env, which names it.
func findServer(t *testing.T, name, script, env, within string, paths ...string) string {
	t.Helper()
	for _, p := range paths {
		if p == "" {
			continue
		}
		if within == "" {
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p
			}
		} else if _, err := os.Stat(filepath.Join(p, within)); err == nil {
			return p
		}
	}
	why := fmt.Sprintf("%s is missing: run %s and set %s (make test does both)", name, script, env)
	if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// minioServer is a MinIO server on a free port of 127.0.0.1 with its data in a temporary
// directory, stopped by its PID when the test ends.
type minioServer struct {
	t    *testing.T
	bin  string
	dir  string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	cl   *minio.Client
}

// storeEnv is what TestMain sets the variables blockfs reads a store's credentials from to:
// those of every server startMinio and startAzurite start, no Azure SAS token or connection
// string, and no GCS emulator named by variable (the tests name it with --endpoint, so that
// the fault proxy can sit in between). Set once for the whole run, not by each test
// (t.Setenv), so that a test of a store may run in parallel (t.Parallel refuses a test that
// sets variables); a test of other credentials gives its commands their own (runEnv).
var storeEnv = map[string]string{
	"AWS_ACCESS_KEY_ID":               minioUser,
	"AWS_SECRET_ACCESS_KEY":           minioPass,
	"AWS_REGION":                      "us-east-1",
	"AWS_ENDPOINT_URL":                "",
	"AZURE_STORAGE_KEY":               azuriteKey,
	"AZURE_STORAGE_SAS_TOKEN":         "",
	"AZURE_STORAGE_CONNECTION_STRING": "",
	"STORAGE_EMULATOR_HOST":           "",
}

// startMinio starts a server; the AWS variables are already its credentials (storeEnv).
func startMinio(t *testing.T) *minioServer {
	t.Helper()
	s := &minioServer{t: t, bin: minioBinary(t), dir: t.TempDir(), addr: freeAddr(t)}
	s.start()
	t.Cleanup(s.kill)
	cl, err := minio.New(s.addr, &minio.Options{Creds: credentials.NewStaticV4(minioUser, minioPass, ""), Region: "us-east-1"})
	require.NoError(t, err)
	s.cl = cl
	return s
}

// endpoint is the server's URL.
func (s *minioServer) endpoint() string { return "http://" + s.addr }

// start runs the server and waits until /minio/health/ready answers 200.
func (s *minioServer) start() {
	t := s.t
	t.Helper()
	var log strings.Builder
	s.cmd = exec.Command(s.bin, "server", s.dir, "--address", s.addr, "--quiet")
	s.cmd.Env = append(os.Environ(), "MINIO_BROWSER=off", "MINIO_ROOT_USER="+minioUser, "MINIO_ROOT_PASSWORD="+minioPass,
		"MINIO_API_REQUESTS_MAX=64", "GOMAXPROCS=2")
	s.cmd.Stdout, s.cmd.Stderr = &log, &log
	require.NoError(t, s.cmd.Start())
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.endpoint() + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-s.done:
			t.Fatalf("minio exited before it was ready: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			t.Fatalf("minio not ready after 60 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill stops the server by its PID (SIGKILL: it keeps nothing we need in memory) and waits.
func (s *minioServer) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// bucket creates a bucket.
func (s *minioServer) bucket(name string) {
	require.NoError(s.t, s.cl.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}))
}

// put stores data at key.
func (s *minioServer) put(bucket, key string, data []byte) {
	_, err := s.cl.PutObject(context.Background(), bucket, key, strings.NewReader(string(data)), int64(len(data)), minio.PutObjectOptions{})
	require.NoError(s.t, err)
}

// get returns the object at key.
func (s *minioServer) get(bucket, key string) []byte {
	o, err := s.cl.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	require.NoError(s.t, err)
	defer o.Close()
	data, err := io.ReadAll(o)
	require.NoError(s.t, err)
	return data
}

// freeAddr returns a free 127.0.0.1:PORT.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// faultProxy sits between blockfs and MinIO and breaks requests on demand. It reads each HTTP
// request off the connection and forwards it on a fresh upstream connection, so a fault hits
// one request: a 503, a reset, a response body cut short, with a byte flipped or shifted by
// 4 KiB (the right length and headers, other bytes), added latency, or a store that accepts
// and never answers.
type faultProxy struct {
	l        net.Listener
	upstream string

	// Faults: each counter is how many of the next requests get it (-1: all of them).
	err503, reset, truncate, flip, shift, hang, deny atomic.Int64
	delay                                            atomic.Int64 // nanoseconds added before each request
	sent                                             atomic.Int64 // bytes of successful GET bodies forwarded
	hanging                                          atomic.Int64 // requests held unanswered now

	mu    sync.Mutex
	log   []string // "METHOD path" of every request, in order
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// startProxy listens on a free port and forwards to upstream (host:port).
func startProxy(t *testing.T, upstream string) *faultProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{l: l, upstream: upstream, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) endpoint() string { return "http://" + p.l.Addr().String() }

func (p *faultProxy) close() {
	p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// clear ends every fault.
func (p *faultProxy) clear() {
	for _, c := range []*atomic.Int64{&p.err503, &p.reset, &p.truncate, &p.flip, &p.shift, &p.hang, &p.deny, &p.delay} {
		c.Store(0)
	}
}

// settle waits until no request the proxy holds unanswered is left (each client gave up on
// it), so that every load begun while the store hung has succeeded on a retry or failed: a
// read after it starts a load of its own instead of joining one of the outage's.
func (p *faultProxy) settle(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return p.hanging.Load() == 0 }, time.Minute, 10*time.Millisecond,
		"requests still held by the proxy")
	time.Sleep(200 * time.Millisecond) // the daemon's loads publish what their last try gave
}

// requests returns the request log.
func (p *faultProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// take reports whether the next request gets the fault counted by c.
func take(c *atomic.Int64) bool {
	for {
		n := c.Load()
		if n == 0 {
			return false
		}
		if n < 0 || c.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
			c.Close()
		}()
	}
}

// serve forwards the requests of one client connection until it or a fault closes it.
func (p *faultProxy) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		p.mu.Lock()
		p.log = append(p.log, req.Method+" "+req.URL.Path)
		p.mu.Unlock()
		if d := p.delay.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		switch {
		case take(&p.hang):
			// Accept and never answer; the client's timeout must end it.
			p.hanging.Add(1)
			_, _ = io.Copy(io.Discard, c)
			p.hanging.Add(-1)
			return
		case take(&p.reset):
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			return
		case take(&p.deny):
			msg := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied.</Message></Error>`
			fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
			continue
		case take(&p.err503):
			msg := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>test proxy</Message></Error>`
			fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
			continue
		}
		if !p.forward(c, req, body) {
			return
		}
	}
}

// forward sends req to the upstream on a new connection and copies the answer back, cut
// short or with a byte flipped when asked. It reports whether the client connection may go on.
func (p *faultProxy) forward(c net.Conn, req *http.Request, body []byte) bool {
	up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // the store is down: the client sees a reset
		}
		return false
	}
	defer up.Close()
	req.Body = io.NopCloser(strings.NewReader(string(body)))
	req.ContentLength = int64(len(body))
	if err := req.Write(up); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	get := req.Method == http.MethodGet && resp.StatusCode/100 == 2 && len(data) > 1
	if req.Method == http.MethodGet && resp.StatusCode/100 == 2 {
		p.sent.Add(int64(len(data)))
	}
	cut := get && take(&p.truncate)
	if get && take(&p.flip) {
		data[len(data)/2] ^= 0x5a
	}
	if get && len(data) > 4096 && take(&p.shift) {
		data = append(data[4096:], data[:4096]...) // as if the store sent the range 4 KiB on
	}
	resp.Body = io.NopCloser(strings.NewReader(string(data)))
	if req.Method != http.MethodHead { // a HEAD's Content-Length is the object's, with no body
		resp.ContentLength = int64(len(data))
	}
	resp.TransferEncoding = nil
	if !cut {
		return resp.Write(c) == nil
	}
	// Headers promise the whole body; half of it comes, then the connection closes.
	var hdr strings.Builder
	resp.Body = io.NopCloser(strings.NewReader(""))
	_ = resp.Write(&hdr)
	_, _ = io.WriteString(c, hdr.String())
	_, _ = c.Write(data[:len(data)/2])
	return false
}

// readAllOrEIO reads path in chunks of n bytes with pread and compares each with want. Every
// read must return exactly want's bytes or fail with EIO; it returns how many failed.
func readAllOrEIO(t *testing.T, path string, want []byte, n int) int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, n)
	failed := 0
	for off := 0; off < len(want); off += n {
		k, err := f.ReadAt(buf, int64(off))
		if err != nil && err != io.EOF {
			require.ErrorIs(t, err, syscall.EIO, "read at %d", off)
			failed++
			continue
		}
		end := min(off+n, len(want))
		require.Equal(t, end-off, k, "short read at %d", off)
		require.True(t, string(buf[:k]) == string(want[off:end]), "wrong bytes at offset %d: never other bytes", off)
	}
	return failed
}

// readEIO reads 1 MiB at the start of path, which must fail with EIO in less than bound (what
// names the case in a failure), and returns how long it took.
func readEIO(t *testing.T, path string, bound time.Duration, what string) time.Duration {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	start := time.Now()
	_, err = f.ReadAt(make([]byte, 1<<20), 0)
	took := time.Since(start)
	require.ErrorIs(t, err, syscall.EIO, what)
	require.Less(t, took, bound, "%s: EIO took %v", what, took)
	return took
}

// minioListAll lists every object under prefix.
func minioListAll(prefix string) minio.ListObjectsOptions {
	return minio.ListObjectsOptions{Prefix: prefix, Recursive: true}
}
