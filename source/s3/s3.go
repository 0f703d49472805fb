// Package s3 is the S3 backend of objstore (AWS S3, MinIO, Ceph RGW, R2, and GCS through its
// S3 interoperability): s3://BUCKET/PREFIX, a Client over minio-go/v7 (small, kept by MinIO,
// and speaking the S3 API of every store above with the AWS credential chain), with no
// retries of its own: objstore.Store retries, bounds and checks every request.
package s3

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/source/objstore"
)

// Scheme is the prefix of a dataset URL: s3://BUCKET/PREFIX.
const Scheme = "s3://"

// Location is a parsed s3:// URL.
type Location struct {
	Bucket string
	Prefix string // without a leading or trailing '/'; may be empty
}

// ParseURL parses s3://BUCKET[/PREFIX].
func ParseURL(s string) (Location, error) {
	names, prefix, err := objstore.SplitURL(s, "s3://BUCKET/PREFIX")
	if err != nil {
		return Location{}, err
	}
	return Location{Bucket: names[0], Prefix: prefix}, nil
}

// Open returns the store of the dataset at rawURL (s3://BUCKET/PREFIX). It does no I/O.
func Open(rawURL string, opt objstore.Options) (*objstore.Store, error) {
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
	return objstore.New(&client{cl: minio.Core{Client: cl}, bucket: loc.Bucket, partSize: opt.PartSize}, loc.Prefix, opt)
}

// newClient makes the minio-go client: the endpoint from the options or the AWS variables,
// credentials the way the AWS CLI finds them, and no retries of its own (the Store retries).
func newClient(opt objstore.Options) (*minio.Client, error) {
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
	tr := objstore.Transport(opt)
	return minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: region,
		BucketLookup: lookup, Transport: tr, MaxRetries: 1})
}

// client is objstore.Client over one bucket.
type client struct {
	cl       minio.Core
	bucket   string
	partSize int64 // a PUT larger than this is a multipart upload of parts this size
}

func (c *client) Get(ctx context.Context, key string, off, n int64, tag string) (io.ReadCloser, int64, error) {
	var opt minio.GetObjectOptions
	if tag != "" {
		if err := opt.SetMatchETag(tag); err != nil {
			return nil, 0, err
		}
	}
	switch {
	case n > 0:
		if err := opt.SetRange(off, off+n-1); err != nil {
			return nil, 0, err
		}
	case off > 0:
		if err := opt.SetRange(off, 0); err != nil {
			return nil, 0, err
		}
	}
	body, info, _, err := c.cl.GetObject(ctx, c.bucket, key, opt)
	if err != nil {
		return nil, 0, err
	}
	return body, info.Size, nil
}

func (c *client) Stat(ctx context.Context, key string) (objstore.Object, error) {
	oi, err := c.cl.StatObject(ctx, c.bucket, key, minio.StatObjectOptions{})
	return objstore.Object{Key: oi.Key, Size: oi.Size, Tag: oi.ETag}, err
}

func (c *client) List(ctx context.Context, prefix string, fn func(objstore.Object) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing's goroutine when fn stops early
	for oi := range c.cl.Client.ListObjects(ctx, c.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return oi.Err
		}
		if err := fn(objstore.Object{Key: oi.Key, Size: oi.Size, Tag: oi.ETag}); err != nil {
			return err
		}
	}
	return nil
}

func (c *client) Put(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	return c.put(ctx, key, r, size, false)
}

func (c *client) Create(ctx context.Context, key string, r io.ReadSeeker, size int64) error {
	return c.put(ctx, key, r, size, true)
}

// put stores the object; create: only where there is none (If-None-Match: *).
func (c *client) put(ctx context.Context, key string, r io.ReadSeeker, size int64, create bool) error {
	opt := minio.PutObjectOptions{ContentType: "application/octet-stream", NumThreads: 1, PartSize: uint64(c.partSize)}
	if create {
		opt.SetMatchETagExcept("*")
	}
	_, err := c.cl.Client.PutObject(ctx, c.bucket, key, r, size, opt)
	return err
}

func (c *client) Remove(ctx context.Context, key string) error {
	return c.cl.RemoveObject(ctx, c.bucket, key, minio.RemoveObjectOptions{})
}

// Answer reads the S3 error response in err.
func (c *client) Answer(err error) objstore.Answer {
	er := minio.ToErrorResponse(err)
	a := objstore.Answer{Status: er.StatusCode, Code: er.Code}
	switch er.Code {
	case "NoSuchKey":
		a.Kind = objstore.NotFound
	case "NoSuchBucket":
		a.Kind = objstore.NoBucket
		a.Hint = fmt.Sprintf("there is no bucket %q at %s (check the bucket's name and %s)", c.bucket, c.Endpoint(), optname.Flag("endpoint"))
	case "PreconditionFailed":
		a.Kind = objstore.Changed
	case "InvalidRange":
		a.Kind = objstore.Short
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken":
		a.Kind = objstore.Denied
		a.Hint = "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or ~/.aws/credentials"
	case "SlowDown":
		a.Kind = objstore.Throttled
	case "RequestTimeout", "InternalError", "ServiceUnavailable", "RequestTimeTooSkewed",
		"ConditionalRequestConflict": // a conditional create beside another: AWS says try again
		a.Kind = objstore.Transient
	}
	return a
}

// URL is s3://BUCKET/KEY (s3://BUCKET for the whole bucket).
func (c *client) URL(key string) string {
	if key == "" {
		return Scheme + c.bucket
	}
	return Scheme + c.bucket + "/" + strings.TrimSuffix(key, "/")
}

func (c *client) Endpoint() string { return c.cl.EndpointURL().String() }
