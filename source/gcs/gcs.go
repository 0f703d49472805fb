// Package gcs is the Google Cloud Storage backend of objstore: gs://BUCKET/PREFIX over the
// JSON API (a thin client on net/http: ranged media GETs pinned to the generation seen at
// open with ifGenerationMatch, object metadata, paged listings, media uploads, deletes).
// Credentials are Application Default Credentials as Google's own tools find them
// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's application-default login, the metadata server on
// GCP, workload identity), through golang.org/x/oauth2/google; with none, requests go
// unauthenticated (a public bucket). An emulator (fake-gcs-server) is named by --endpoint or
// $STORAGE_EMULATOR_HOST, as Google's client libraries do, and is asked without credentials.
package gcs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/source/objstore"
)

// Scheme is the prefix of a dataset URL: gs://BUCKET/PREFIX.
const Scheme = "gs://"

// defaultEndpoint is Google's.
const defaultEndpoint = "https://storage.googleapis.com"

// scope is what blockfs asks of the credentials: reading, and for pack writing, objects.
const scope = "https://www.googleapis.com/auth/devstorage.read_write"

// Open returns the store of the dataset at rawURL (gs://BUCKET/PREFIX). It does no I/O:
// credentials are found at the first request.
func Open(rawURL string, opt objstore.Options) (*objstore.Store, error) {
	names, prefix, err := objstore.SplitURL(rawURL, "gs://BUCKET/PREFIX")
	if err != nil {
		return nil, err
	}
	bucket := names[0]
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	ep, emulator := opt.Endpoint, opt.Endpoint != ""
	if !emulator {
		if host := os.Getenv("STORAGE_EMULATOR_HOST"); host != "" {
			ep, emulator = host, true
		}
	}
	if !emulator {
		ep = defaultEndpoint
	}
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep // an emulator's host:port, as STORAGE_EMULATOR_HOST gives it
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%s %q: give a URL like http://127.0.0.1:4443", optname.Flag("endpoint"), ep)
	}
	c := &client{bucket: bucket, endpoint: u.Scheme + "://" + u.Host, base: objstore.Transport(opt), anonymous: emulator, timeout: opt.Timeout}
	return objstore.New(c, prefix, opt)
}

// client is objstore.Client over one bucket.
type client struct {
	bucket, endpoint string
	base             http.RoundTripper
	anonymous        bool          // an emulator: no credentials
	timeout          time.Duration // bounds a token's fetch, as a request's try

	once  sync.Once
	hc    *http.Client
	noADC error // why no credentials were found (requests go unauthenticated)
}

// http returns the HTTP client, with the credentials found at the first call.
func (c *client) http() *http.Client {
	c.once.Do(func() {
		c.hc = &http.Client{Transport: c.base, CheckRedirect: objstore.NoRedirects}
		if c.anonymous {
			return
		}
		// The token's fetches (and refreshes) go through a client with a time limit: the
		// oauth2 transport asks for a token without the request's context, and a token
		// service that never answered would hold every request.
		tc := &http.Client{Transport: c.base, Timeout: c.timeout, CheckRedirect: objstore.NoRedirects}
		creds, err := google.FindDefaultCredentials(context.WithValue(context.Background(), oauth2.HTTPClient, tc), scope)
		if err != nil {
			c.noADC = err
			return
		}
		// No redirects: the JSON API gives none, and the token must not follow one elsewhere.
		c.hc = &http.Client{Transport: &oauth2.Transport{Source: creds.TokenSource, Base: c.base}, CheckRedirect: objstore.NoRedirects}
	})
	return c.hc
}

// objectURL is the JSON API's URL of the object key (its metadata; ?alt=media: its bytes).
func (c *client) objectURL(key string) string {
	return c.endpoint + "/storage/v1/b/" + url.PathEscape(c.bucket) + "/o/" + url.PathEscape(key)
}

// do sends a request and returns the response if its status is one of ok; otherwise an
// objstore.HTTPError saying what the service said.
func (c *client) do(ctx context.Context, method, u string, body io.Reader, size int64, hdr http.Header, ok ...int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	return nil, serviceError(resp)
}

// serviceError reads the JSON API's error body: {"error": {"code": 404, "message": "..."}}.
func serviceError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := resp.Status
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	} else if t := strings.TrimSpace(string(b)); t != "" && len(t) < 200 {
		msg = t
	}
	err := objstore.ResponseError(resp, msg)
	if resp.StatusCode == http.StatusNotFound && noBucket(msg) {
		err.(*objstore.HTTPError).Code = noSuchBucket
	}
	return err
}

// meta is what the JSON API says of an object.
type meta struct {
	Name       string `json:"name"`
	Size       string `json:"size"`
	Generation string `json:"generation"`
}

func (m meta) object() (objstore.Object, error) {
	size, err := strconv.ParseInt(m.Size, 10, 64)
	if err != nil || size < 0 {
		return objstore.Object{}, fmt.Errorf("gs://%s: the service gave no size (%q)", m.Name, m.Size)
	}
	return objstore.Object{Key: m.Name, Size: size, Tag: m.Generation}, nil
}

func (c *client) Get(ctx context.Context, key string, off, n int64, tag string) (io.ReadCloser, int64, error) {
	u := c.objectURL(key) + "?alt=media"
	if tag != "" {
		u += "&ifGenerationMatch=" + url.QueryEscape(tag)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	ranged := objstore.SetRange(req, off, n)
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, 0, err
	}
	// fake-gcs-server ignores ifGenerationMatch on reads; X-Goog-Generation says what came.
	return objstore.Ranged(resp, off, n, ranged, tag, resp.Header.Get("X-Goog-Generation"), serviceError)
}

func (c *client) Stat(ctx context.Context, key string) (objstore.Object, error) {
	resp, err := c.do(ctx, http.MethodGet, c.objectURL(key)+"?fields=name,size,generation", nil, 0, nil, http.StatusOK)
	if err != nil {
		return objstore.Object{}, err
	}
	defer resp.Body.Close()
	var m meta
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		return objstore.Object{}, fmt.Errorf("reading %s's metadata: %w", c.URL(key), err)
	}
	return m.object()
}

func (c *client) List(ctx context.Context, prefix string, fn func(objstore.Object) error) error {
	token := ""
	for range maxPages {
		q := url.Values{"prefix": {prefix}, "fields": {"items(name,size,generation),nextPageToken"}, "maxResults": {"1000"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		resp, err := c.do(ctx, http.MethodGet, c.endpoint+"/storage/v1/b/"+url.PathEscape(c.bucket)+"/o?"+q.Encode(), nil, 0, nil, http.StatusOK)
		if err != nil {
			return err
		}
		var page struct {
			Items         []meta `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("reading the listing of %s: %w", c.URL(prefix), err)
		}
		for _, m := range page.Items {
			o, err := m.object()
			if err != nil {
				return err
			}
			if err := fn(o); err != nil {
				return err
			}
		}
		if page.NextPageToken == "" {
			return nil
		}
		if page.NextPageToken == token {
			return fmt.Errorf("the listing of %s repeats its page token", c.URL(prefix))
		}
		token = page.NextPageToken
	}
	return fmt.Errorf("the listing of %s runs past %d pages", c.URL(prefix), maxPages)
}

// maxPages bounds a listing: 1,000 objects a page, 20 million objects.
const maxPages = 20000

func (c *client) Put(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	if _, err := r.Seek(0, io.SeekStart); err != nil { // a retry sends it all again
		return err
	}
	u := c.endpoint + "/upload/storage/v1/b/" + url.PathEscape(c.bucket) + "/o?uploadType=media&name=" + url.QueryEscape(key)
	var body io.Reader = r
	if size == 0 {
		body = bytes.NewReader(nil)
	}
	resp, err := c.do(ctx, http.MethodPost, u, body, size, nil, http.StatusOK)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Create uploads with ifGenerationMatch=0 (no live version: none there), as a multipart
// upload (the object's metadata, then its bytes): the emulator honours the condition only
// there, GCS in both. Creates are small (a lock): the body is built in memory.
func (c *client) Create(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(r, size))
	if err != nil {
		return err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	meta, _ := json.Marshal(map[string]string{"name": key})
	for _, p := range []struct {
		typ  string
		data []byte
	}{{"application/json; charset=UTF-8", meta}, {"application/octet-stream", data}} {
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {p.typ}})
		if err != nil {
			return err
		}
		_, _ = w.Write(p.data)
	}
	if err := mw.Close(); err != nil {
		return err
	}
	u := c.endpoint + "/upload/storage/v1/b/" + url.PathEscape(c.bucket) + "/o?uploadType=multipart&ifGenerationMatch=0"
	hdr := http.Header{"Content-Type": {"multipart/related; boundary=" + mw.Boundary()}}
	resp, err := c.do(ctx, http.MethodPost, u, &body, int64(body.Len()), hdr, http.StatusOK)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func (c *client) Remove(ctx context.Context, key string) error {
	resp, err := c.do(ctx, http.MethodDelete, c.objectURL(key), nil, 0, nil, http.StatusNoContent, http.StatusOK, http.StatusNotFound)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Answer reads the status of a response in err, and what the service said of a 404.
func (c *client) Answer(err error) objstore.Answer {
	a := objstore.HTTPAnswer(err)
	// The token service's refusal (a revoked or expired refresh token) is the credentials'.
	var re *oauth2.RetrieveError
	if a.Status == 0 && errors.As(err, &re) && re.Response != nil {
		a.Status, a.Code = re.Response.StatusCode, re.ErrorCode
		switch s := a.Status; {
		case s == http.StatusTooManyRequests:
			a.Kind = objstore.Throttled
		case s >= 500:
			a.Kind = objstore.Transient
		default:
			a.Kind = objstore.Denied
		}
	}
	switch {
	case a.Code == noSuchBucket:
		a.Kind = objstore.NoBucket
		a.Hint = fmt.Sprintf("there is no bucket %q at %s (check the bucket's name and %s)", c.bucket, c.endpoint, optname.Flag("endpoint"))
	case a.Kind == objstore.Denied && c.anonymous:
		a.Hint = "an emulator (" + optname.Flag("endpoint") + ", $STORAGE_EMULATOR_HOST) is asked without credentials"
	case a.Kind == objstore.Denied:
		a.Hint = "check the Google credentials: GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login, or the VM's service account"
		if c.noADC != nil {
			a.Hint = fmt.Sprintf("no Google credentials were found (%v): set GOOGLE_APPLICATION_CREDENTIALS or run gcloud auth application-default login", c.noADC)
		}
	}
	return a
}

// noSuchBucket is the Code serviceError gives a 404 that says the bucket is missing.
const noSuchBucket = "NoSuchBucket"

// noBucket reports whether a 404's message says the bucket is missing ("The specified bucket
// does not exist."), not the object ("No such object: BUCKET/KEY", whose names may hold any
// words): by how it starts.
func noBucket(msg string) bool {
	m := strings.ToLower(msg)
	return strings.HasPrefix(m, "the specified bucket does not exist") || strings.HasPrefix(m, "no such bucket")
}

// URL is gs://BUCKET/KEY (gs://BUCKET for the whole bucket).
func (c *client) URL(key string) string {
	if key == "" {
		return Scheme + c.bucket
	}
	return Scheme + c.bucket + "/" + strings.TrimSuffix(key, "/")
}

func (c *client) Endpoint() string { return c.endpoint }
