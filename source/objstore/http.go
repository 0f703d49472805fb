package objstore

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// What the backends that speak HTTP themselves (source/web, source/gcs) share: one transport
// of the pool's size, the error of a response not asked for, and the checks of a ranged GET's
// answer. (source/s3's minio-go makes its requests itself, over the same transport.)

// Transport returns an HTTP transport for a store of these options: connections for the
// pool, the bytes as stored (no compression: ranges and checksums are of them), a connect and
// a header time limit. The requests' own time limits and stalls are Store's.
func Transport(opt Options) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          2 * opt.Concurrency,
		MaxIdleConnsPerHost:   2 * opt.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: opt.Timeout,
		DisableCompression:    true,
		// HTTP/1.1: each request of the pool a connection of its own (a custom DialContext
		// keeps net/http from HTTP/2, which would put them all on one).
	}
}

// HTTPError is a response that was not the one asked for: its status, the service's code
// for it where it gives one ("BlobNotFound"), and what was wrong.
type HTTPError struct {
	Status int
	Code   string
	What   string
}

func (e *HTTPError) Error() string { return e.What }

// ResponseError makes the error of the unwanted response resp, saying what was wrong.
func ResponseError(resp *http.Response, what string) error {
	return &HTTPError{Status: resp.StatusCode, What: fmt.Sprintf("%s %s: %s", resp.Request.Method, Bare(resp.Request.URL), what)}
}

// Bare is u without its query or user (a redirect's signed parameters, a SAS token): how a
// URL appears in messages and logs.
func Bare(u *url.URL) string {
	v := *u
	v.RawQuery, v.User = "", nil
	return v.String()
}

// NoRedirects is an http.Client's CheckRedirect for a store's API, which does not redirect:
// a 3xx is an answer to report, never a request (and credentials) sent elsewhere.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// SameSchemeRedirects is an http.Client's CheckRedirect for a web server: at most 10
// redirects, and never from https:// to plain http://, where anyone on the path could change
// the manifest, and with it every checksum.
func SameSchemeRedirects(r *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if via[0].URL.Scheme == "https" && r.URL.Scheme != "https" {
		return fmt.Errorf("refused a redirect from https to %s", Bare(r.URL))
	}
	return nil
}

// HTTPAnswer says what err was when it is an *HTTPError, by its status alone (a backend adds
// what its store's bodies say); an Answer of no status otherwise (no response came).
func HTTPAnswer(err error) Answer {
	var he *HTTPError
	if !errors.As(err, &he) {
		return Answer{}
	}
	a := Answer{Status: he.Status, Code: he.Code}
	if a.Code == "" {
		a.Code = http.StatusText(he.Status)
	}
	switch s := he.Status; {
	case s == http.StatusNotFound || s == http.StatusGone:
		a.Kind = NotFound
	case s == http.StatusPreconditionFailed:
		a.Kind = Changed
	case s == http.StatusRequestedRangeNotSatisfiable:
		a.Kind = Short
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		a.Kind = Denied
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
		a.Kind = Throttled
	case s >= 500:
		a.Kind = Transient
	}
	return a
}

// SetRange asks req for the bytes [off, off+n) (n < 0: from off to the end); it reports
// whether the request is for a range rather than the whole object.
func SetRange(req *http.Request, off, n int64) bool {
	switch {
	case n > 0:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	case off > 0:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
	default:
		return false
	}
	return true
}

// CheckRange checks that resp (to a GET that SetRange made ranged or not) holds the bytes
// [off, off+n) and says how many: a 206 from off, or a 200 of the whole object where that is
// what was asked. A server that sends the whole object for a range is refused by name.
func CheckRange(resp *http.Response, off, n int64, ranged bool) error {
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, err := rangeStart(resp.Header.Get("Content-Range"))
		if !ranged || err != nil || start != off {
			return ResponseError(resp, fmt.Sprintf("Content-Range %q is not the range asked for (from %d)", resp.Header.Get("Content-Range"), off))
		}
	case http.StatusOK:
		if ranged && !(off == 0 && resp.ContentLength == n) {
			return ResponseError(resp, "the server ignores range requests (it sent the whole object for a range); serve the dataset from one that honours them")
		}
	default:
		return ResponseError(resp, resp.Status)
	}
	if resp.ContentLength < 0 {
		return ResponseError(resp, "the server gave no Content-Length")
	}
	return nil
}

// Ranged takes the answer resp to a GET that SetRange made ranged or not: its body and length
// when it holds [off, off+n) of the version tag, as the answer names it (version: "" where it
// names none: a store that ignored the condition still says what it sent); else, with the body
// closed, refused's error for a status other than 200 and 206 (nil: the status alone), or
// what was wrong.
func Ranged(resp *http.Response, off, n int64, ranged bool, tag, version string, refused func(*http.Response) error) (io.ReadCloser, int64, error) {
	err := CheckRange(resp, off, n, ranged)
	switch {
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent && refused != nil:
		err = refused(resp)
	case err == nil && tag != "" && version != "" && version != tag:
		err = &HTTPError{Status: http.StatusPreconditionFailed,
			What: fmt.Sprintf("GET %s: the object is now version %s, not %s", Bare(resp.Request.URL), version, tag)}
	}
	if err != nil {
		resp.Body.Close()
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// SplitURL splits a store's URL of the form SCHEME://NAME/.../PREFIX (form names them, as
// "az://ACCOUNT/CONTAINER/PREFIX") into its names and its prefix (no leading or trailing '/'),
// refusing a missing name, characters no bucket, account or container has, and a prefix
// with "//" or "..".
func SplitURL(rawURL, form string) ([]string, string, error) {
	scheme, rest, _ := strings.Cut(form, "://")
	labels := strings.Split(rest, "/")
	n := len(labels) - 1
	body, ok := strings.CutPrefix(rawURL, scheme+"://")
	if !ok {
		return nil, "", fmt.Errorf("%s: not a URL of the form %s", rawURL, form)
	}
	parts := strings.SplitN(body, "/", n+1)
	for len(parts) < n+1 {
		parts = append(parts, "")
	}
	names, prefix := parts[:n], strings.Trim(parts[n], "/")
	for i, name := range names {
		if name == "" {
			return nil, "", fmt.Errorf("%s: no %s (give %s)", rawURL, strings.ToLower(labels[i]), form)
		}
	}
	if strings.ContainsAny(strings.Join(names, ""), " \\?#%") || strings.Contains(prefix, "//") || strings.Contains("/"+prefix+"/", "/../") {
		return nil, "", fmt.Errorf("%s: not a valid %s and prefix", rawURL, strings.ToLower(strings.Join(labels[:n], ", ")))
	}
	return names, prefix, nil
}

// rangeStart returns the first byte of a Content-Range: "bytes FIRST-LAST/SIZE".
func rangeStart(cr string) (int64, error) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	first, _, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 {
		return 0, errors.New("not a byte range")
	}
	return strconv.ParseInt(first, 10, 64)
}
