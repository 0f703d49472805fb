// Package web is the read-only web backend of objstore: a dataset directory published on a
// web server (https://HOST/PATH, or http:// for a server of one's own), read with ranged GETs
// as any static host, CDN or the Hugging Face hub's resolve/ URLs serve them. The manifest
// lists every file, so the store needs no listing: each object is asked for with a HEAD, and
// its version pinned by its strong ETag (If-Match), else by its Last-Modified
// (If-Unmodified-Since); the manifest's CRC32Cs check every byte either way. Plain net/http:
// a web server needs no SDK.
package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/source/objstore"
)

// Schemes are the prefixes of the URLs this backend serves.
const (
	HTTPS = "https://"
	HTTP  = "http://"
)

// lastModified marks a version tag that is a Last-Modified date, not an ETag.
const lastModified = "last-modified:"

// Open returns the store of the dataset directory at rawURL (https://HOST/PATH). It does no
// I/O.
func Open(rawURL string, opt objstore.Options) (*objstore.Store, error) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: not a URL (%v)", rawURL, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return nil, fmt.Errorf("%s: give https://HOST/PATH of a dataset directory", rawURL)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("%s: a dataset's URL has no query, fragment or user (give https://HOST/PATH)", rawURL)
	case strings.Contains(u.Path, "//") || strings.Contains(u.Path+"/", "/../") || strings.Contains(u.Path+"/", "/./"):
		return nil, fmt.Errorf("%s: not a valid path", rawURL)
	}
	if opt.Endpoint != "" {
		return nil, fmt.Errorf("%s names its server: %s is for s3://", rawURL, optname.Flag("endpoint"))
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	tr := objstore.Transport(opt)
	c := &client{base: u.Scheme + "://" + u.Host, hc: &http.Client{Transport: tr, CheckRedirect: objstore.SameSchemeRedirects}}
	return objstore.New(c, strings.Trim(u.Path, "/"), opt)
}

// client is objstore.Client over one web server.
type client struct {
	base string // scheme://host
	hc   *http.Client
}

// URL is the object's URL: the server's, then the key, escaped.
func (c *client) URL(key string) string {
	return c.base + (&url.URL{Path: "/" + strings.TrimSuffix(key, "/")}).EscapedPath()
}

func (c *client) Endpoint() string { return c.base }

// request makes a request of key with the conditions of version tag.
func (c *client) request(ctx context.Context, method, key, tag string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL(key), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	switch {
	case strings.HasPrefix(tag, lastModified):
		req.Header.Set("If-Unmodified-Since", strings.TrimPrefix(tag, lastModified))
	case tag != "":
		req.Header.Set("If-Match", tag)
	}
	return req, nil
}

// versionOf returns the version tag of a response: its strong ETag, else its Last-Modified,
// else "" (the object is checked by its size and the manifest's CRC32C alone).
func versionOf(h http.Header) string {
	if et := h.Get("ETag"); et != "" && !strings.HasPrefix(et, "W/") {
		return et
	}
	if lm := h.Get("Last-Modified"); lm != "" {
		return lastModified + lm
	}
	return ""
}

func (c *client) Stat(ctx context.Context, key string) (objstore.Object, error) {
	req, err := c.request(ctx, http.MethodHead, key, "")
	if err != nil {
		return objstore.Object{}, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return objstore.Object{}, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return objstore.Object{}, objstore.ResponseError(resp, resp.Status)
	}
	if resp.ContentLength < 0 {
		return objstore.Object{}, objstore.ResponseError(resp, "the server gave no Content-Length")
	}
	return objstore.Object{Key: key, Size: resp.ContentLength, Tag: versionOf(resp.Header)}, nil
}

func (c *client) Get(ctx context.Context, key string, off, n int64, tag string) (io.ReadCloser, int64, error) {
	req, err := c.request(ctx, http.MethodGet, key, tag)
	if err != nil {
		return nil, 0, err
	}
	ranged := objstore.SetRange(req, off, n)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	return objstore.Ranged(resp, off, n, ranged, tag, versionOf(resp.Header), nil)
}

func (c *client) List(context.Context, string, func(objstore.Object) error) error {
	return fmt.Errorf("%w: a web server has no listing (a dataset's manifest names its files)", objstore.ErrNoListing)
}

func (c *client) Put(context.Context, string, io.ReadSeeker, int64) error {
	return fmt.Errorf("%w: %s:// serves datasets, it does not take them (pack to a local directory or an object store, then publish it)", objstore.ErrReadOnly, strings.SplitN(c.base, ":", 2)[0])
}

func (c *client) Create(ctx context.Context, key string, _ io.ReadSeeker, _ int64) error {
	return c.Put(ctx, key, nil, 0)
}

func (c *client) Remove(ctx context.Context, key string) error { return c.Put(ctx, key, nil, 0) }

// Answer reads the status of a response in err (0: no response came).
func (c *client) Answer(err error) objstore.Answer {
	a := objstore.HTTPAnswer(err)
	if a.Kind == objstore.Denied {
		a.Hint = "the server refused: blockfs reads public datasets over " + strings.SplitN(c.base, ":", 2)[0]
	}
	return a
}
