package connlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serve starts an http.Server on a capped listener; slow requests (/slow) wait on release.
func serve(t *testing.T, n int, release chan struct{}) (*Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := New(ln, n)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-release; fmt.Fprint(w, "slow") })
	srv := &http.Server{Handler: mux, ConnState: l.ConnState}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l, ln.Addr().String()
}

// get sends one keep-alive request on c and reads the answer.
func get(c net.Conn, path string) (string, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestCapHoldsIdleConnections: 100 idle connections (some after a request, kept alive, some
// that never sent one) leave at most the cap open in the server, and a new client is served
// at once, the oldest idle connection closed to make room.
func TestCapHoldsIdleConnections(t *testing.T) {
	l, addr := serve(t, 4, nil)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := 0; i < 100; i++ {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		if i%2 == 0 {
			_, _ = get(c, "/") // may fail: a later dial may close it first
		}
	}
	require.Eventually(t, func() bool { return l.Open() <= 4 }, 5*time.Second, 10*time.Millisecond)
	assert.GreaterOrEqual(t, l.Dropped(), uint64(96-4))

	resp, err := http.Get("http://" + addr + "/")
	require.NoError(t, err, "a new client is served while 100 connections idle")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "ok", string(b))
	assert.LessOrEqual(t, l.Open(), 4)
}

// TestCapNeverCutsARequest: a connection serving a request is not closed to make room; when
// all are busy, the newcomer is closed at once instead of queued.
func TestCapNeverCutsARequest(t *testing.T) {
	release := make(chan struct{})
	l, addr := serve(t, 2, release)
	answers := make(chan string, 2)
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		go func() {
			s, err := get(c, "/slow")
			if err != nil {
				s = err.Error()
			}
			answers <- s
		}()
	}
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.busy) == 2
	}, 5*time.Second, 10*time.Millisecond)

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = get(c, "/")
	assert.Error(t, err, "the newcomer is closed")
	assert.Less(t, time.Since(start), 2*time.Second, "at once, not queued")

	close(release)
	for i := 0; i < 2; i++ {
		assert.Equal(t, "slow", <-answers, "busy requests finish")
	}
}
