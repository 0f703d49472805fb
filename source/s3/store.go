// Package s3 serves a dataset from an S3-compatible object store (AWS S3, MinIO, Ceph RGW, GCS
// and R2 through their S3 APIs): a layout.Store for opening it (the manifest, and each object's
// size and ETag), a source.Blocks that reads it with a bounded pool of ranged GETs, and the
// upload that blockfs pack uses. Object keys are PREFIX/ + the manifest's paths.
//
// Every GET carries If-Match with the ETag the dataset was opened with, so a replaced object is
// source.ErrChanged, never other bytes; every byte of an object with a checksum in the
// manifest goes through that checksum before any byte of it is returned (source.ErrCorrupt),
// whatever part of it a read wants. Requests time out, fail sooner when they stall, and are
// retried with backoff; after the budget the read fails with source.ErrUnavailable (retry.go).
//
// The client is minio-go/v7: small, kept by MinIO, and speaks the S3 API of every store
// above with the AWS credential chain.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/source"
)

// Scheme is the prefix of a dataset URL: s3://BUCKET/PREFIX.
const Scheme = "s3://"

// IsURL reports whether s names an object store dataset.
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme) }

// Location is a parsed s3:// URL.
type Location struct {
	Bucket string
	Prefix string // without a leading or trailing '/'; may be empty
}

// ParseURL parses s3://BUCKET[/PREFIX].
func ParseURL(s string) (Location, error) {
	if !IsURL(s) {
		return Location{}, fmt.Errorf("%s: not an s3:// URL", s)
	}
	rest := strings.TrimPrefix(s, Scheme)
	bucket, prefix, _ := strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	if bucket == "" {
		return Location{}, fmt.Errorf("%s: no bucket (give s3://BUCKET/PREFIX)", s)
	}
	if strings.ContainsAny(bucket, " \\?#") || strings.Contains(prefix, "//") || strings.Contains("/"+prefix+"/", "/../") {
		return Location{}, fmt.Errorf("%s: not a valid bucket and prefix", s)
	}
	return Location{Bucket: bucket, Prefix: prefix}, nil
}

func (l Location) String() string {
	if l.Prefix == "" {
		return Scheme + l.Bucket
	}
	return Scheme + l.Bucket + "/" + l.Prefix
}

// Key returns the object key of the dataset path rel.
func (l Location) Key(rel string) string {
	if l.Prefix == "" {
		return rel
	}
	return l.Prefix + "/" + rel
}

// Options configure a Store. Zero fields take the stated defaults.
type Options struct {
	// Endpoint is the store's URL (http://127.0.0.1:9000) or host[:port] (https). Default:
	// $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS S3 (s3.amazonaws.com).
	Endpoint string
	// Region: default $AWS_REGION, $AWS_DEFAULT_REGION, else what the store says.
	Region string
	// Concurrency is how many GETs (or part uploads) may be in flight at once; default 8.
	Concurrency int
	// PartSize is the largest ranged GET, and pack's multipart part size; default 8 MiB, at
	// least 5 MiB (the S3 minimum part).
	PartSize int64
	// Timeout bounds one try of a request, its body included (a slow transfer); default 30 s.
	Timeout time.Duration
	// StallTimeout fails a try sooner when it makes no progress for this long: no connection,
	// no answer, no byte of the body (a store that hangs). Once the store has answered nothing
	// for (Retries+1) x StallTimeout, a reader's request gives up after one more try and a
	// readahead's at once (retry.go). Default 5 s.
	StallTimeout time.Duration
	// Retries is how many times a failed request (5xx, throttling, reset, timeout, stall,
	// truncated body) is tried again; default 4, negative for none.
	Retries int
	// Backoff is the wait before the first retry, doubled for each next one up to 2 s;
	// default 200 ms.
	Backoff time.Duration
}

// Defaults for Options.
const (
	DefaultConcurrency  = 8
	DefaultPartSize     = 8 << 20
	MinPartSize         = 5 << 20
	DefaultTimeout      = 30 * time.Second
	DefaultStallTimeout = 5 * time.Second
	DefaultRetries      = 4
	DefaultBackoff      = 200 * time.Millisecond
	maxBackoff          = 2 * time.Second
)

// Validate applies defaults and checks the options.
func (o *Options) Validate() error {
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	} else if o.Retries < 0 {
		o.Retries = 0
	}
	if o.Backoff == 0 {
		o.Backoff = DefaultBackoff
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	switch {
	case o.Concurrency < 1 || o.Concurrency > 256:
		return fmt.Errorf("concurrency %d is out of range (1 to 256)", o.Concurrency)
	case o.PartSize < MinPartSize || o.PartSize > 5<<30:
		return fmt.Errorf("part size %d is out of range (5 MiB to 5 GiB)", o.PartSize)
	case o.Timeout < 0 || o.StallTimeout < 0 || o.Backoff < 0:
		return errors.New("timeouts and backoff must not be negative")
	}
	return nil
}

// Store is one dataset's prefix in a bucket. Safe for concurrent use.
type Store struct {
	// Immutable after Open.
	cl    minio.Core
	loc   Location
	opt   Options
	slots *source.Slots // one token per request in flight

	h   health   // what the store's answers say
	ctr counters // requests, retries and failures

	listOnce sync.Once
	listed   map[string]minio.ObjectInfo // the prefix's objects, by key (Stat)
	listErr  error

	blocksMu sync.Mutex
	blocks   map[source.Table]*Blocks // BlocksOf's, one a table
}

// Open returns the store of the dataset at url (s3://BUCKET/PREFIX). It does no I/O.
func Open(rawURL string, opt Options) (*Store, error) {
	loc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	cl, err := newClient(opt)
	if err != nil {
		return nil, err
	}
	return &Store{cl: minio.Core{Client: cl}, loc: loc, opt: opt, slots: source.NewSlots(opt.Concurrency)}, nil
}

// newClient makes the minio-go client: the endpoint from the options or the AWS variables,
// credentials the way the AWS CLI finds them, and no retries of its own (the Store retries).
func newClient(opt Options) (*minio.Client, error) {
	ep := opt.Endpoint
	for _, v := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if ep == "" {
			ep = os.Getenv(v)
		}
	}
	secure := true
	host := "s3.amazonaws.com"
	if ep != "" {
		if !strings.Contains(ep, "://") {
			ep = "https://" + ep
		}
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("endpoint %q: give a URL like http://127.0.0.1:9000 or a host name", opt.Endpoint+os.Getenv("AWS_ENDPOINT_URL"))
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	region := opt.Region
	for _, v := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if region == "" {
			region = os.Getenv(v)
		}
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{Profile: os.Getenv("AWS_PROFILE")},
	})
	lookup := minio.BucketLookupAuto
	if ep != "" {
		lookup = minio.BucketLookupPath // MinIO, Ceph and most local endpoints
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          2 * opt.Concurrency,
		MaxIdleConnsPerHost:   2 * opt.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: opt.Timeout,
		DisableCompression:    true,
	}
	return minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: region,
		BucketLookup: lookup, Transport: tr, MaxRetries: 1})
}

// Location implements layout.Store.
func (s *Store) Location() string { return s.loc.String() }

// Path implements layout.Store: the object's URL.
func (s *Store) Path(rel string) string { return Scheme + s.loc.Bucket + "/" + s.loc.Key(rel) }

// endpoint names the store in messages: its URL.
func (s *Store) endpoint() string { return s.cl.EndpointURL().String() }

// url names an object key in messages.
func (s *Store) url(key string) string { return Scheme + s.loc.Bucket + "/" + key }

// ManifestName is the manifest's path (layout.ManifestName; not imported, to keep this
// package below layout).
const ManifestName = "blockfs.json"

// FieldsManifestName is the manifest of a dataset with fields (layout.FieldsManifestName):
// a prefix holds a dataset when it has either manifest.
const FieldsManifestName = "blockfs-fields.json"

// maxManifest is how much of a manifest ReadManifest reads (layout refuses more than 1 GiB).
const maxManifest = 1<<30 + 1

// ReadManifest implements layout.Store.
func (s *Store) ReadManifest() ([]byte, error) {
	data, err := s.read(ManifestName, maxManifest)
	if err != nil {
		return nil, s.describe(err, "") // layout names the manifest
	}
	return data, nil
}

// Exists reports whether the prefix has the object rel.
func (s *Store) Exists(rel string) (bool, error) {
	_, err := s.statObject(context.Background(), s.loc.Key(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// ReadFile returns the object rel of the prefix, up to limit bytes of it; a missing object is
// an error wrapping fs.ErrNotExist.
func (s *Store) ReadFile(rel string, limit int64) ([]byte, error) {
	data, err := s.read(rel, limit)
	if err != nil {
		return nil, s.describe(err, s.loc.Key(rel))
	}
	return data, nil
}

// read reads up to limit bytes of the object rel, with retries.
func (s *Store) read(rel string, limit int64) ([]byte, error) {
	var data []byte
	err := s.retry(context.Background(), func(ctx context.Context, progress func()) error {
		body, _, _, err := s.cl.GetObject(ctx, s.loc.Bucket, s.loc.Key(rel), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer body.Close()
		progress()
		data, err = io.ReadAll(io.LimitReader(progressReader{body, progress}, limit))
		return err
	})
	return data, err
}

// Stat implements layout.Store: the object's key and its size and ETag, from one listing of
// the prefix (a page of 1000 objects per request; a HEAD for a key the listing missed).
func (s *Store) Stat(rel string) (string, source.Identity, error) {
	key := s.loc.Key(rel)
	s.listOnce.Do(s.list)
	if s.listErr != nil {
		return "", source.Identity{}, s.listErr
	}
	oi, ok := s.listed[key]
	if !ok {
		var err error
		if oi, err = s.statObject(context.Background(), key); err != nil {
			return "", source.Identity{}, err
		}
	}
	return key, source.Identity{Size: oi.Size, Tag: oi.ETag}, nil
}

// statObject returns the object's facts, or an error wrapping fs.ErrNotExist.
func (s *Store) statObject(ctx context.Context, key string) (minio.ObjectInfo, error) {
	var oi minio.ObjectInfo
	err := s.retry(ctx, func(ctx context.Context, _ func()) error {
		var err error
		oi, err = s.cl.StatObject(ctx, s.loc.Bucket, key, minio.StatObjectOptions{})
		return err
	})
	if err != nil {
		return oi, s.describe(err, key)
	}
	return oi, nil
}

// list reads the prefix's object listing into s.listed (Stat's once).
func (s *Store) list() {
	s.listed = map[string]minio.ObjectInfo{}
	prefix := s.loc.Key("") // "PREFIX/", or "" for a whole bucket
	err := s.retry(context.Background(), func(ctx context.Context, progress func()) error {
		clear(s.listed)
		for oi := range s.cl.Client.ListObjects(ctx, s.loc.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if oi.Err != nil {
				return oi.Err
			}
			progress()
			s.listed[oi.Key] = oi
		}
		return nil
	})
	if err != nil {
		s.listErr = s.describe(err, prefix)
	}
}

// progressReader calls progress after each read that returns bytes.
type progressReader struct {
	r        io.Reader
	progress func()
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.progress()
	}
	return n, err
}

// Blocks implements layout.Store: BlocksOf(t).
func (s *Store) Blocks(t source.Table) source.Blocks { return s.BlocksOf(t) }

// BlocksOf returns the one Blocks of t's objects in s: opening a dataset reads through it
// (its offsets files' ends) and so does the mount after, so the objects it staged serve the
// mount and its staging area is counted once.
func (s *Store) BlocksOf(t source.Table) *Blocks {
	if !reflect.TypeOf(t).Comparable() {
		return NewBlocks(s, t) // a table that cannot key a map (none of blockfs's own)
	}
	s.blocksMu.Lock()
	defer s.blocksMu.Unlock()
	if b, ok := s.blocks[t]; ok {
		return b
	}
	if s.blocks == nil {
		s.blocks = map[source.Table]*Blocks{}
	}
	b := NewBlocks(s, t)
	s.blocks[t] = b
	return b
}

// describe turns a failed request on key into what callers test for: fs.ErrNotExist for a
// missing object or bucket, source.ErrChanged for a failed If-Match, and otherwise
// source.ErrUnavailable with the store's words. The message names the object key, unless
// key is "" (the caller names it).
func (s *Store) describe(err error, key string) error {
	name := ""
	if key != "" {
		name = s.url(key) + ": "
	}
	switch code := minio.ToErrorResponse(err).Code; code {
	case "NoSuchKey":
		return fmt.Errorf("%s%w (%s)", name, fs.ErrNotExist, code)
	case "NoSuchBucket":
		return fmt.Errorf("there is no bucket %q at %s (check the bucket's name and %s)", s.loc.Bucket, s.endpoint(), optname.Flag("endpoint"))
	case "PreconditionFailed":
		return fmt.Errorf("%w: the object was replaced (its ETag changed)", source.ErrChanged)
	case "InvalidRange":
		return fmt.Errorf("%w: the object is shorter than it was", source.ErrChanged)
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken":
		return fmt.Errorf("%s%w: %v (check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or ~/.aws/credentials)", name, source.ErrDenied, err)
	}
	if errors.Is(err, source.ErrCorrupt) || errors.Is(err, source.ErrChanged) {
		return err
	}
	return fmt.Errorf("%w: %s%v", source.ErrUnavailable, name, err)
}
