package objstore

import (
	"context"
	"errors"
	"io"
)

// A Client speaks one store's protocol, one request a call: the seam between a backend (an
// S3 API, a web server) and Store, which does everything else once for every backend: the
// pool of requests, time limits, stalls, retries with backoff, the checksums, staging, the
// order of an upload (manifest last) and the counters. A Client is safe for concurrent use,
// retries nothing itself, and says what each failure was through Answer.
type Client interface {
	// Get returns the bytes [off, off+n) of the object key (n < 0: from off to its end; Store
	// never asks for none) and how many the body holds, refused (an Answer of Changed) unless
	// the object is still the version tag ("": any). A backend over net/http checks the
	// answer with Ranged.
	Get(ctx context.Context, key string, off, n int64, tag string) (io.ReadCloser, int64, error)
	// Stat returns the object's size and version.
	Stat(ctx context.Context, key string) (Object, error)
	// List calls fn for every object whose key starts with prefix; ErrNoListing where the
	// store cannot list.
	List(ctx context.Context, prefix string, fn func(Object) error) error
	// Put stores the size bytes of r as the object key (r may be read again on a retry: an
	// io.ReadSeeker); ErrReadOnly where the store takes no writes, ErrTooLarge where not one
	// of this size.
	Put(ctx context.Context, key string, r io.ReadSeeker, size int64) error
	// Create is Put only where there is no object key: a conditional create (S3's and Azure's
	// If-None-Match: *, GCS's ifGenerationMatch=0), answered Changed where one is, so that of
	// two clients creating one key at once exactly one succeeds.
	Create(ctx context.Context, key string, r io.ReadSeeker, size int64) error
	// Remove deletes the object key; a missing one is not an error.
	Remove(ctx context.Context, key string) error
	// Answer says what a failed request's error was.
	Answer(err error) Answer
	// URL names an object (or, with the prefix, the dataset) in messages and paths:
	// s3://BUCKET/KEY, https://HOST/PATH.
	URL(key string) string
	// Endpoint names the server in messages.
	Endpoint() string
}

// Object is one object's facts: its key, size and version (an ETag, or what else the store
// pins a version by).
type Object struct {
	Key  string
	Size int64
	Tag  string
}

// Answer is what a failed request's error says of the store's answer: the HTTP status (0: no
// answer came: refused, reset, timed out), what it means, the store's code ("SlowDown"), and
// what the user should check in the backend's words (for NoBucket the whole message; for
// Denied where the credentials come from).
type Answer struct {
	Status int
	Kind   Kind
	Code   string
	Hint   string
}

// Kind is what a store's answer means to blockfs.
type Kind int

const (
	Other     Kind = iota // an answer of no kind below, or none (Status 0)
	NotFound              // no such object
	NoBucket              // no such bucket or container: the location is wrong
	Changed               // the version pinned is gone (a failed If-Match), or a Create's key is there
	Short                 // the range is past the object's end: it is shorter than it was
	Denied                // credentials refused or missing
	Throttled             // slow down: retried
	Transient             // the store failed this request (5xx, a timeout of its own): retried
)

// Errors a Client returns for what its store cannot do.
var (
	ErrNoListing = errors.New("the store cannot list objects")
	ErrReadOnly  = errors.New("the store is read-only")
	ErrTooLarge  = errors.New("too large for the store")
	// ErrObjectExists is Store.Create's error where the object is there already.
	ErrObjectExists = errors.New("the object exists")
)
