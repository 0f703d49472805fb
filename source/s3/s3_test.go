package s3

import (
	"errors"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in, bucket, prefix string
		ok                 bool
	}{
		{"s3://b/p/q", "b", "p/q", true},
		{"s3://b/p/q/", "b", "p/q", true},
		{"s3://b", "b", "", true},
		{"s3:///x", "", "", false},
		{"s3://b/a//c", "", "", false},
		{"s3://b/a/../c", "", "", false},
		{"/local/path", "", "", false},
	} {
		l, err := ParseURL(c.in)
		if (err == nil) != c.ok || (c.ok && (l.Bucket != c.bucket || l.Prefix != c.prefix)) {
			t.Errorf("ParseURL(%q) = %+v, %v", c.in, l, err)
		}
	}
	if k := (Location{Bucket: "b", Prefix: "p"}).Key("blocks/000001.bin"); k != "p/blocks/000001.bin" {
		t.Errorf("Key = %q", k)
	}
}

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{io.ErrUnexpectedEOF, true},
		{errors.New("connection reset by peer"), true},
		{minio.ErrorResponse{StatusCode: 503, Code: "SlowDown"}, true},
		{minio.ErrorResponse{StatusCode: 500, Code: "InternalError"}, true},
		{minio.ErrorResponse{StatusCode: 429}, true},
		{minio.ErrorResponse{StatusCode: 404, Code: "NoSuchKey"}, false},
		{minio.ErrorResponse{StatusCode: 412, Code: "PreconditionFailed"}, false},
		{minio.ErrorResponse{StatusCode: 403, Code: "AccessDenied"}, false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	var o Options
	if err := o.Validate(); err != nil || o.Concurrency != DefaultConcurrency || o.PartSize != DefaultPartSize || o.Retries != DefaultRetries {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o = Options{Retries: -1}
	if err := o.Validate(); err != nil || o.Retries != 0 {
		t.Fatalf("no retries: %+v, %v", o, err)
	}
	for _, bad := range []Options{{PartSize: 1 << 20}, {Concurrency: 1000}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
