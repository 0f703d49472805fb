package objstore

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/blockfs/blockfs/source"
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
	key := s.key(rel)
	err = s.retryNoTimeout(ctx, func(ctx context.Context, _ func()) error {
		return s.cl.Put(ctx, key, io.NewSectionReader(f, 0, st.Size()), st.Size())
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
		want[s.key(rel)] = true
	}
	prefix := s.key("") // "PREFIX/", or "" for a whole bucket
	var others []string
	if err := s.cl.List(ctx, prefix, func(o Object) error {
		if !want[o.Key] {
			others = append(others, o.Key)
		}
		return nil
	}); err != nil {
		return s.describe(err, prefix)
	}
	for _, key := range others {
		if err := s.cl.Remove(ctx, key); err != nil {
			return s.describe(err, key)
		}
	}
	return nil
}
