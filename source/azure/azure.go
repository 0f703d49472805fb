// Package azure is the Azure Blob Storage backend of objstore: az://ACCOUNT/CONTAINER/PREFIX
// over the Blob service's REST API (a thin client on net/http: ranged GETs pinned to the ETag
// seen at open with If-Match, blob properties, paged listings, block blob puts, deletes).
// Requests are signed with the account's shared key ($AZURE_STORAGE_KEY, or the AccountKey of
// $AZURE_STORAGE_CONNECTION_STRING) or carry a SAS token ($AZURE_STORAGE_SAS_TOKEN), as the
// Azure CLI takes them; with neither, a Microsoft Entra ID token (entra.go: a service
// principal, the managed identity, the Azure CLI's login), else they go anonymous (a public
// container). An emulator (Azurite) is named by --endpoint (http://127.0.0.1:10000),
// addressed path-style, and asked with the key or anonymously.
package azure

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/source/objstore"
)

// Scheme is the prefix of a dataset URL: az://ACCOUNT/CONTAINER/PREFIX.
const Scheme = "az://"

// apiVersion is the Blob service version blockfs speaks (x-ms-version).
const apiVersion = "2021-08-06"

// Open returns the store of the dataset at rawURL (az://ACCOUNT/CONTAINER/PREFIX). It does no
// I/O.
func Open(rawURL string, opt objstore.Options) (*objstore.Store, error) {
	names, prefix, err := objstore.SplitURL(rawURL, "az://ACCOUNT/CONTAINER/PREFIX")
	if err != nil {
		return nil, err
	}
	account, container := names[0], names[1]
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	base := "https://" + account + ".blob.core.windows.net"
	pathStyle := opt.Endpoint != ""
	if pathStyle {
		ep := opt.Endpoint
		if !strings.Contains(ep, "://") {
			ep = "https://" + ep
		}
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("%s %q: give a URL like http://127.0.0.1:10000", optname.Flag("endpoint"), opt.Endpoint)
		}
		base = u.Scheme + "://" + u.Host + "/" + account // an emulator's: the account in the path
	}
	c := &client{account: account, container: container, base: base,
		hc: &http.Client{Transport: objstore.Transport(opt), CheckRedirect: objstore.NoRedirects}}
	if err := c.credentials(); err != nil {
		return nil, err
	}
	if c.key == nil && c.sas == nil && !pathStyle {
		direct := objstore.Transport(opt)
		direct.Proxy = nil
		c.entra = &entra{hc: &http.Client{Transport: objstore.Transport(opt), Timeout: opt.Timeout, CheckRedirect: objstore.NoRedirects},
			imds: &http.Client{Transport: direct, CheckRedirect: objstore.NoRedirects}}
	}
	return objstore.New(c, prefix, opt)
}

// client is objstore.Client over one container.
type client struct {
	account, container string
	base               string // https://ACCOUNT.blob.core.windows.net, or an emulator's URL/ACCOUNT
	hc                 *http.Client
	key                []byte     // the shared key; nil: none
	sas                url.Values // a SAS token's parameters; nil: none
	entra              *entra     // Microsoft Entra ID tokens, without a key or SAS; nil: an emulator's
}

// credentials reads the credentials from the environment, as the Azure CLI does.
func (c *client) credentials() error {
	key := os.Getenv("AZURE_STORAGE_KEY")
	if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); key == "" && cs != "" {
		for _, kv := range strings.Split(cs, ";") {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, "AccountKey") {
				key = v
			}
		}
	}
	if key != "" {
		b, err := base64.StdEncoding.DecodeString(key)
		if err != nil {
			return fmt.Errorf("AZURE_STORAGE_KEY is not a storage account key (base64): %v", err)
		}
		c.key = b
		return nil
	}
	if sas := strings.TrimPrefix(os.Getenv("AZURE_STORAGE_SAS_TOKEN"), "?"); sas != "" {
		v, err := url.ParseQuery(sas)
		if err != nil || v.Get("sig") == "" {
			return fmt.Errorf("AZURE_STORAGE_SAS_TOKEN is not a SAS token (it has no sig=)")
		}
		c.sas = v
	}
	return nil
}

// blobURL is the URL of the blob key, with query q.
func (c *client) blobURL(key string, q url.Values) string {
	u := c.base + "/" + c.container
	if key != "" {
		u += (&url.URL{Path: "/" + key}).EscapedPath()
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// request makes a signed request.
func (c *client) request(ctx context.Context, method, key string, q url.Values, body io.Reader, size int64) (*http.Request, error) {
	if c.sas != nil {
		if q == nil {
			q = url.Values{}
		}
		for k, v := range c.sas {
			q[k] = v
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.blobURL(key, q), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	req.Header.Set("x-ms-version", apiVersion)
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	return req, nil
}

// send signs req (with the shared key, if any, or an Entra ID token) and sends it. A failure
// to send names the URL without its query: a SAS token's signature is never in a message.
func (c *client) send(req *http.Request) (*http.Response, error) {
	switch {
	case c.key != nil:
		req.Header.Set("Authorization", "SharedKey "+c.account+":"+c.sign(req))
	case c.entra != nil:
		tok, err := c.entra.token(req.Context())
		if err != nil {
			return nil, err // a source that is there and failed: retried, never anonymous
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := c.hc.Do(req)
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = objstore.Bare(req.URL)
	}
	return resp, err
}

// sign returns the Shared Key signature of req (the Blob service's string to sign).
func (c *client) sign(req *http.Request) string {
	h := req.Header
	length := ""
	if req.ContentLength > 0 {
		length = strconv.FormatInt(req.ContentLength, 10)
	}
	var ms []string
	for k := range h {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-") {
			ms = append(ms, lk)
		}
	}
	slices.Sort(ms)
	var b strings.Builder
	for _, s := range []string{req.Method, h.Get("Content-Encoding"), h.Get("Content-Language"), length, h.Get("Content-MD5"),
		h.Get("Content-Type"), "", h.Get("If-Modified-Since"), h.Get("If-Match"), h.Get("If-None-Match"),
		h.Get("If-Unmodified-Since"), h.Get("Range")} {
		b.WriteString(s + "\n")
	}
	for _, k := range ms {
		b.WriteString(k + ":" + strings.TrimSpace(h.Get(k)) + "\n")
	}
	b.WriteString("/" + c.account + req.URL.EscapedPath())
	q := map[string][]string{} // by lower-case name, as the canonicalized resource has them
	for k, vs := range req.URL.Query() {
		q[strings.ToLower(k)] = append(q[strings.ToLower(k)], vs...)
	}
	var names []string
	for k := range q {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		vs := q[k]
		slices.Sort(vs)
		b.WriteString("\n" + k + ":" + strings.Join(vs, ","))
	}
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(b.String()))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// serviceError reads the Blob service's error: its code (x-ms-error-code, or the XML body's)
// and message.
func serviceError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	_ = xml.Unmarshal(b, &e)
	code := resp.Header.Get("x-ms-error-code")
	if code == "" {
		code = e.Code
	}
	// A private container answers a request with no credentials as if it were not there.
	if anonymous(resp.Request) && (code == "ResourceNotFound" || code == "NoAuthenticationInformation" || code == "PublicAccessNotPermitted") {
		code = anonymousRefused
	}
	msg := strings.TrimSpace(strings.SplitN(e.Message, "\n", 2)[0])
	if msg == "" {
		msg = resp.Status
	}
	what := fmt.Sprintf("%s %s: %s", resp.Request.Method, objstore.Bare(resp.Request.URL), msg)
	if code != "" {
		what += " (" + code + ")"
	}
	return &objstore.HTTPError{Status: resp.StatusCode, Code: code, What: what}
}

// anonymousRefused is the Code of a refusal of a request that carried no credentials.
const anonymousRefused = "AnonymousRefused"

// anonymous reports whether req carried no credentials (no Authorization, no SAS).
func anonymous(req *http.Request) bool {
	return req.Header.Get("Authorization") == "" && req.URL.Query().Get("sig") == ""
}

func (c *client) Get(ctx context.Context, key string, off, n int64, tag string) (io.ReadCloser, int64, error) {
	req, err := c.request(ctx, http.MethodGet, key, nil, nil, 0)
	if err != nil {
		return nil, 0, err
	}
	if tag != "" {
		req.Header.Set("If-Match", tag)
	}
	ranged := objstore.SetRange(req, off, n)
	resp, err := c.send(req)
	if err != nil {
		return nil, 0, err
	}
	return objstore.Ranged(resp, off, n, ranged, tag, resp.Header.Get("ETag"), serviceError)
}

func (c *client) Stat(ctx context.Context, key string) (objstore.Object, error) {
	req, err := c.request(ctx, http.MethodHead, key, nil, nil, 0)
	if err != nil {
		return objstore.Object{}, err
	}
	resp, err := c.send(req)
	if err != nil {
		return objstore.Object{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return objstore.Object{}, serviceError(resp)
	}
	if resp.ContentLength < 0 {
		return objstore.Object{}, objstore.ResponseError(resp, "the service gave no Content-Length")
	}
	return objstore.Object{Key: key, Size: resp.ContentLength, Tag: resp.Header.Get("ETag")}, nil
}

// listing is a page of List Blobs.
type listing struct {
	Blobs []struct {
		Name       string `xml:"Name"`
		Properties struct {
			Length int64  `xml:"Content-Length"`
			ETag   string `xml:"Etag"`
		} `xml:"Properties"`
	} `xml:"Blobs>Blob"`
	NextMarker string `xml:"NextMarker"`
}

// quoted returns an ETag as the ETag header gives it: a listing's comes without the quotes.
func quoted(etag string) string {
	if etag == "" || strings.HasPrefix(etag, `"`) {
		return etag
	}
	return `"` + etag + `"`
}

// maxPages bounds a listing: 5,000 blobs a page, 20 million blobs.
const maxPages = 4000

func (c *client) List(ctx context.Context, prefix string, fn func(objstore.Object) error) error {
	marker := ""
	for range maxPages {
		q := url.Values{"restype": {"container"}, "comp": {"list"}, "prefix": {prefix}, "maxresults": {"5000"}}
		if marker != "" {
			q.Set("marker", marker)
		}
		req, err := c.request(ctx, http.MethodGet, "", q, nil, 0)
		if err != nil {
			return err
		}
		resp, err := c.send(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			err := serviceError(resp)
			resp.Body.Close()
			// Anonymous access to blobs alone, or a SAS token without list: no listing, but
			// each blob may still be asked for (a HEAD each).
			if code := objstore.HTTPAnswer(err).Code; code == anonymousRefused || code == "AuthorizationPermissionMismatch" {
				return fmt.Errorf("%w (%v)", objstore.ErrNoListing, err)
			}
			return err
		}
		var page listing
		err = xml.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("reading the listing of %s: %w", c.URL(prefix), err)
		}
		for _, b := range page.Blobs {
			if err := fn(objstore.Object{Key: b.Name, Size: b.Properties.Length, Tag: quoted(b.Properties.ETag)}); err != nil {
				return err
			}
		}
		if page.NextMarker == "" || page.NextMarker == marker {
			return nil
		}
		marker = page.NextMarker
	}
	return fmt.Errorf("the listing of %s runs past %d pages", c.URL(prefix), maxPages)
}

// maxPut is the largest blob one Put Blob writes.
const maxPut = 5000 << 20

func (c *client) Put(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	return c.put(ctx, key, r, size, false)
}

func (c *client) Create(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	return c.put(ctx, key, r, size, true)
}

// put writes the blob; create: only where there is none (If-None-Match: *).
func (c *client) put(ctx context.Context, key string, r io.ReadSeeker, size int64, create bool) error {
	if size > maxPut {
		return fmt.Errorf("%s: %w: a file of %d bytes is over the 5000 MiB one Put Blob writes; pack with a smaller %s", c.URL(key), objstore.ErrTooLarge, size, optname.Flag("block-size"))
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil { // a retry sends it all again
		return err
	}
	req, err := c.request(ctx, http.MethodPut, key, nil, r, size)
	if err != nil {
		return err
	}
	req.Header.Set("x-ms-blob-type", "BlockBlob")
	req.Header.Set("Content-Type", "application/octet-stream")
	if create {
		req.Header.Set("If-None-Match", "*")
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return serviceError(resp)
	}
	return nil
}

func (c *client) Remove(ctx context.Context, key string) error {
	req, err := c.request(ctx, http.MethodDelete, key, nil, nil, 0)
	if err != nil {
		return err
	}
	req.Header.Set("x-ms-delete-snapshots", "include")
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusNotFound && resp.Header.Get("x-ms-error-code") == "BlobNotFound":
		return nil // gone already
	}
	return serviceError(resp)
}

// Answer reads the Blob service's error code in err.
func (c *client) Answer(err error) objstore.Answer {
	a := objstore.HTTPAnswer(err)
	switch a.Code {
	case "BlobNotFound":
		a.Kind = objstore.NotFound
	case anonymousRefused:
		a.Kind = objstore.Denied
	case "ContainerNotFound", "ResourceNotFound":
		a.Kind = objstore.NoBucket
		a.Hint = fmt.Sprintf("there is no container %q in the account %q at %s (check the URL and %s)", c.container, c.account, c.base, optname.Flag("endpoint"))
	case "ConditionNotMet", "BlobAlreadyExists":
		a.Kind = objstore.Changed
	case "InvalidRange":
		a.Kind = objstore.Short
	case "ServerBusy":
		a.Kind = objstore.Throttled
	case "InternalError", "OperationTimedOut":
		a.Kind = objstore.Transient
	}
	if a.Kind == objstore.Denied {
		a.Hint = "check AZURE_STORAGE_KEY (or AZURE_STORAGE_CONNECTION_STRING) or AZURE_STORAGE_SAS_TOKEN"
		if c.entra != nil {
			a.Hint += ", or the role of the identity on the container; requests carried " + c.entra.status()
		}
	}
	return a
}

// URL is az://ACCOUNT/CONTAINER/KEY.
func (c *client) URL(key string) string {
	u := Scheme + c.account + "/" + c.container
	if key != "" {
		u += "/" + strings.TrimSuffix(key, "/")
	}
	return u
}

func (c *client) Endpoint() string { return c.base }
