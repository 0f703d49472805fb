package s3

import (
	"errors"
	"io"
	"testing"

	"github.com/blockfs/blockfs/source/objstore"

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
}

// TestAnswer: S3's error responses as the kinds objstore retries (or not) and reports.
func TestAnswer(t *testing.T) {
	mc, err := newClient(objstore.Options{Endpoint: "http://127.0.0.1:1", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := &client{cl: minio.Core{Client: mc}, bucket: "b"}
	for _, tc := range []struct {
		err  error
		want objstore.Kind
	}{
		{io.ErrUnexpectedEOF, objstore.Other},
		{errors.New("connection reset by peer"), objstore.Other},
		{minio.ErrorResponse{StatusCode: 503, Code: "SlowDown"}, objstore.Throttled},
		{minio.ErrorResponse{StatusCode: 500, Code: "InternalError"}, objstore.Transient},
		{minio.ErrorResponse{StatusCode: 404, Code: "NoSuchKey"}, objstore.NotFound},
		{minio.ErrorResponse{StatusCode: 404, Code: "NoSuchBucket"}, objstore.NoBucket},
		{minio.ErrorResponse{StatusCode: 412, Code: "PreconditionFailed"}, objstore.Changed},
		{minio.ErrorResponse{StatusCode: 416, Code: "InvalidRange"}, objstore.Short},
		{minio.ErrorResponse{StatusCode: 403, Code: "AccessDenied"}, objstore.Denied},
	} {
		a := c.Answer(tc.err)
		if a.Kind != tc.want {
			t.Errorf("Answer(%v) = %+v, want kind %v", tc.err, a, tc.want)
		}
		if status := minio.ToErrorResponse(tc.err).StatusCode; a.Status != status {
			t.Errorf("Answer(%v).Status = %d, want %d", tc.err, a.Status, status)
		}
	}
}
