package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/minio/minio-go/v7"
)

// Objects lists the objects under the prefix: each one's path relative to it and its size.
// (pack --merge reads a pack in parts' files this way.)
func (s *Store) Objects(ctx context.Context) (map[string]int64, error) {
	prefix := s.loc.Key("") // "PREFIX/", or "" for a whole bucket
	out := map[string]int64{}
	err := s.retry(ctx, func(ctx context.Context, progress func()) error {
		clear(out)
		for oi := range s.cl.Client.ListObjects(ctx, s.loc.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if oi.Err != nil {
				return oi.Err
			}
			progress()
			out[strings.TrimPrefix(oi.Key, prefix)] = oi.Size
		}
		return nil
	})
	if err != nil {
		return nil, s.describe(err, prefix)
	}
	return out, nil
}

// PutBytes stores data as the object rel of the prefix, in one request (a small file: a part
// manifest, a merged dataset's ids and manifest), retried whole like any request.
func (s *Store) PutBytes(ctx context.Context, rel string, data []byte) error {
	key := s.loc.Key(rel)
	opt := minio.PutObjectOptions{ContentType: "application/octet-stream", NumThreads: 1, PartSize: uint64(s.opt.PartSize)}
	err := s.retryNoTimeout(ctx, func(ctx context.Context, _ func()) error {
		_, err := s.cl.Client.PutObject(ctx, s.loc.Bucket, key, bytes.NewReader(data), int64(len(data)), opt)
		return err
	})
	if err != nil {
		return fmt.Errorf("uploading %s: %w", s.url(key), s.describe(err, ""))
	}
	return nil
}

// Remove deletes the object rel of the prefix; a missing one is not an error.
func (s *Store) Remove(ctx context.Context, rel string) error {
	key := s.loc.Key(rel)
	err := s.retry(ctx, func(ctx context.Context, _ func()) error {
		return s.cl.RemoveObject(ctx, s.loc.Bucket, key, minio.RemoveObjectOptions{})
	})
	if err != nil {
		return s.describe(err, key)
	}
	return nil
}

// OpenObject returns a stream of object rel of the prefix from its start, read once as a
// whole (blockfs index), refused by the store if the object is no longer the version of ETag
// etag. The request is retried until its headers arrive; a body that breaks is the reader's
// error.
func (s *Store) OpenObject(ctx context.Context, rel, etag string) (io.ReadCloser, error) {
	key := s.loc.Key(rel)
	var body io.ReadCloser
	err := s.retry(ctx, func(ctx context.Context, _ func()) error {
		o := minio.GetObjectOptions{}
		if etag != "" {
			if err := o.SetMatchETag(etag); err != nil {
				return err
			}
		}
		b, _, _, err := s.cl.GetObject(context.WithoutCancel(ctx), s.loc.Bucket, key, o)
		body = b
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.url(key), s.describe(err, key))
	}
	return body, nil
}
