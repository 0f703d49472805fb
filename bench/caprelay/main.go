// Command caprelay is the store's network for bench/nodes_bench.py: a TCP relay to one
// upstream (MinIO) with a listener per node, all of them sharing one bandwidth cap on the bytes
// the store sends, so that the store is the bottleneck as on a cluster; it counts the bytes it
// relays to each node.
//
//	caprelay -upstream HOST:PORT -nodes N -rate BYTES_PER_SECOND -stats FILE
//
// It prints each node's listening address, one per line, then writes FILE (JSON: "sent", the
// bytes sent to each node) every 100 ms and on SIGTERM, when it exits.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// pacer spaces the relayed bytes at rate bytes a second, across every connection.
type pacer struct {
	mu   sync.Mutex
	next time.Time
	rate float64
}

// wait returns once n more bytes may go.
func (p *pacer) wait(n int) {
	if p.rate <= 0 {
		return
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	time.Sleep(time.Until(at))
}

func main() {
	upstream := flag.String("upstream", "", "the store's host:port")
	nodes := flag.Int("nodes", 1, "listeners, one per node")
	rate := flag.Float64("rate", 0, "bytes a second from the store, all nodes together (0: no cap)")
	stats := flag.String("stats", "", "write the counters here")
	flag.Parse()
	p := &pacer{rate: *rate}
	sent := make([]atomic.Int64, *nodes)
	for i := range *nodes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "caprelay:", err)
			os.Exit(1)
		}
		fmt.Println(l.Addr())
		go accept(l, *upstream, p, &sent[i])
	}
	write := func() {
		out := make([]int64, len(sent))
		for i := range sent {
			out[i] = sent[i].Load()
		}
		b, _ := json.Marshal(map[string]any{"sent": out})
		tmp := *stats + ".tmp"
		if os.WriteFile(tmp, b, 0o644) == nil {
			_ = os.Rename(tmp, *stats)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(100 * time.Millisecond)
	for {
		select {
		case <-tick.C:
			write()
		case <-sig:
			write()
			return
		}
	}
}

func accept(l net.Listener, upstream string, p *pacer, sent *atomic.Int64) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go relay(c, upstream, p, sent)
	}
}

// relay copies c's requests to a new upstream connection as they come, and the answers back
// paced, 32 KiB at a time.
func relay(c net.Conn, upstream string, p *pacer, sent *atomic.Int64) {
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer u.Close()
	go func() {
		_, _ = io.Copy(u, c)
		_ = u.(*net.TCPConn).CloseWrite()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			p.wait(n)
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
			sent.Add(int64(n))
		}
		if err != nil {
			return
		}
	}
}
