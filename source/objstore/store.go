// Package objstore serves a dataset from an object store or a web server, whatever its
// protocol (a Client: source/s3, source/web): a layout.Store for opening it (the manifest, and
// each object's size and version), a source.Blocks that reads it with a bounded pool of
// ranged requests, and the upload that blockfs pack uses. Object keys are PREFIX/ + the
// manifest's paths.
//
// Every read names the version the dataset was opened with (If-Match on the ETag), so a
// replaced object is source.ErrChanged, never other bytes; every byte of an object with a
// checksum in the manifest goes through that checksum before any byte of it is returned
// (source.ErrCorrupt), whatever part of it a read wants. Requests time out, fail sooner when
// they stall, and are retried with backoff; after the budget the read fails with
// source.ErrUnavailable (retry.go). All of that is written here once, for every backend.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"sync"
	"time"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/source"
)

// Options configure a Store. Zero fields take the stated defaults.
type Options struct {
	// Endpoint is the store's URL (http://127.0.0.1:9000) or host[:port] (https), for a
	// backend that has one (S3: default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS S3).
	Endpoint string
	// Region: S3's; default $AWS_REGION, $AWS_DEFAULT_REGION, else what the store says.
	Region string
	// Concurrency is how many GETs (or part uploads) may be in flight at once; default 8.
	Concurrency int
	// PartSize is the largest ranged GET, and pack's multipart part size; default 8 MiB, at
	// least 5 MiB (S3's smallest part).
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

// Store is one dataset's prefix in a store. Safe for concurrent use.
type Store struct {
	// Immutable after New.
	cl     Client
	prefix string // without a leading or trailing '/'; may be empty
	opt    Options
	slots  *source.Slots // one token per request in flight

	h   health   // what the store's answers say
	ctr counters // requests, retries and failures

	listOnce sync.Once
	listed   map[string]Object // the prefix's objects, by key (Stat); nil: no listing
	listErr  error

	blocksMu sync.Mutex
	blocks   map[source.Table]*Blocks // BlocksOf's, one a table
}

// New returns the store of the dataset at prefix (without a leading or trailing '/'; "": the
// whole bucket) through cl. It does no I/O.
func New(cl Client, prefix string, opt Options) (*Store, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	return &Store{cl: cl, prefix: prefix, opt: opt, slots: source.NewSlots(opt.Concurrency)}, nil
}

// key returns the object key of the dataset path rel ("": the prefix, slash-terminated).
func (s *Store) key(rel string) string {
	if s.prefix == "" {
		return rel
	}
	return s.prefix + "/" + rel
}

// Location implements layout.Store: the dataset's URL.
func (s *Store) Location() string { return s.cl.URL(s.prefix) }

// Path implements layout.Store: the object's URL.
func (s *Store) Path(rel string) string { return s.cl.URL(s.key(rel)) }

// url names an object key in messages.
func (s *Store) url(key string) string { return s.cl.URL(key) }

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
	_, err := s.statObject(context.Background(), s.key(rel))
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
		return nil, s.describe(err, s.key(rel))
	}
	return data, nil
}

// read reads up to limit bytes of the object rel, with retries.
func (s *Store) read(rel string, limit int64) ([]byte, error) {
	var data []byte
	err := s.retry(context.Background(), func(ctx context.Context, progress func()) error {
		body, _, err := s.cl.Get(ctx, s.key(rel), 0, -1, "")
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
// the prefix (S3: a page of 1000 objects per request) where the store lists, and a HEAD for a
// key the listing missed or each key where it does not.
func (s *Store) Stat(rel string) (string, source.Identity, error) {
	key := s.key(rel)
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
	return key, source.Identity{Size: oi.Size, Tag: oi.Tag}, nil
}

// statObject returns the object's facts, or an error wrapping fs.ErrNotExist.
func (s *Store) statObject(ctx context.Context, key string) (Object, error) {
	var oi Object
	err := s.retry(ctx, func(ctx context.Context, _ func()) error {
		var err error
		oi, err = s.cl.Stat(ctx, key)
		return err
	})
	if err != nil {
		return oi, s.describe(err, key)
	}
	return oi, nil
}

// list reads the prefix's object listing into s.listed (Stat's once); a store that cannot
// list leaves it nil, and Stat asks for each object.
func (s *Store) list() {
	listed := map[string]Object{}
	prefix := s.key("") // "PREFIX/", or "" for a whole bucket
	err := s.retry(context.Background(), func(ctx context.Context, progress func()) error {
		clear(listed)
		return s.cl.List(ctx, prefix, func(o Object) error {
			progress()
			listed[o.Key] = o
			return nil
		})
	})
	switch {
	case errors.Is(err, ErrNoListing):
	case err != nil:
		s.listErr = s.describe(err, prefix)
	default:
		s.listed = listed
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
// missing object, source.ErrChanged for a failed If-Match or a short object, source.ErrDenied
// for refused credentials, and otherwise source.ErrUnavailable with the store's words. The
// message names the object, unless key is "" (the caller names it).
func (s *Store) describe(err error, key string) error {
	if errors.Is(err, source.ErrCorrupt) || errors.Is(err, source.ErrChanged) || cannot(err) {
		return err
	}
	name := ""
	if key != "" {
		name = s.url(key) + ": "
	}
	a := s.cl.Answer(err)
	switch a.Kind {
	case NotFound:
		return fmt.Errorf("%s%w (%s)", name, fs.ErrNotExist, or(a.Code, "not found"))
	case NoBucket:
		if a.Hint != "" {
			return errors.New(a.Hint)
		}
		return fmt.Errorf("%s is not there (%v): check the URL and %s", s.Location(), err, optname.Flag("endpoint"))
	case Changed:
		return fmt.Errorf("%w: the object was replaced (its ETag or Last-Modified changed)", source.ErrChanged)
	case Short:
		return fmt.Errorf("%w: the object is shorter than it was", source.ErrChanged)
	case Denied:
		return fmt.Errorf("%s%w: %v (%s)", name, source.ErrDenied, err, or(a.Hint, "at "+s.cl.Endpoint()))
	}
	if errors.Is(err, source.ErrNotTried) { // kept for the cache's readers to see
		return fmt.Errorf("%w: %s%w", source.ErrUnavailable, name, err)
	}
	return fmt.Errorf("%w: %s%v", source.ErrUnavailable, name, err)
}

// or returns s, or else def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
