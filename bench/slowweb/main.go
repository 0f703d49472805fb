package main

import (
	"flag"
	"net/http"
	"time"
)

// Command slowweb serves a directory over HTTP (ranges, Last-Modified: Go's file server),
// answering each request after -delay: a web server across the internet, for bench/web_open.sh.
func main() {
	dir := flag.String("dir", ".", "root")
	addr := flag.String("addr", "127.0.0.1:8088", "listen")
	delay := flag.Duration("delay", 20*time.Millisecond, "per request")
	flag.Parse()
	fs := http.FileServer(http.Dir(*dir))
	_ = http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(*delay)
		fs.ServeHTTP(w, r)
	}))
}
