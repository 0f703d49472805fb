package s3

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/blockfs/blockfs/source"
	"github.com/minio/minio-go/v7"
)

// Upload copies the finished dataset in the local directory dir (a layout.Writer's output) to
// the store's prefix through a Stream: every file but the manifest, Concurrency at a time, each
// in one PUT or a multipart upload of PartSize parts, then the manifest, so the dataset appears
// whole or not at all. The local files stay. Begin says what happens to a dataset already there.
func (s *Store) Upload(ctx context.Context, dir string, force bool) error {
	u, err := s.Begin(ctx, force, "")
	if err != nil {
		return err
	}
	return u.Finish(dir)
}

// putFile uploads the file path as the dataset's file rel, retried whole like any request (but without a time limit per
// try: a large object takes as long as it takes; the connection's own timeouts still apply).
func (s *Store) putFile(ctx context.Context, path, rel string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	key := s.loc.Key(rel)
	opt := minio.PutObjectOptions{PartSize: uint64(s.opt.PartSize), NumThreads: 1, ContentType: "application/octet-stream"}
	err = s.retryNoTimeout(ctx, func(ctx context.Context, _ func()) error {
		_, err := s.cl.Client.PutObject(ctx, s.loc.Bucket, key, io.NewSectionReader(f, 0, st.Size()), st.Size(), opt)
		return err
	})
	if err != nil {
		return fmt.Errorf("uploading %s: %w", s.url(key), s.describe(err, ""))
	}
	return nil
}

// retryNoTimeout is retry with no time limit and no stall timeout on each try (uploads of
// large objects: a store may take a while to answer a part it has received whole).
func (s *Store) retryNoTimeout(ctx context.Context, fn func(context.Context, func()) error) error {
	return s.retryFor(ctx, source.Read{}, 0, 0, fn)
}

// removeOthers deletes the objects under the prefix that are not in keep (relative paths):
// what a replaced dataset had and the new one has not.
func (s *Store) removeOthers(ctx context.Context, keep []string) error {
	want := map[string]bool{}
	for _, rel := range keep {
		want[s.loc.Key(rel)] = true
	}
	prefix := s.loc.Key("") // "PREFIX/", or "" for a whole bucket
	for oi := range s.cl.Client.ListObjects(ctx, s.loc.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return s.describe(oi.Err, prefix)
		}
		if want[oi.Key] {
			continue
		}
		if err := s.cl.RemoveObject(ctx, s.loc.Bucket, oi.Key, minio.RemoveObjectOptions{}); err != nil {
			return s.describe(err, oi.Key)
		}
	}
	return nil
}
