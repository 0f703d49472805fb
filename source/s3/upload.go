package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/minio/minio-go/v7"
)

// ErrExists: Upload found a dataset at the prefix and was not asked to replace it.
var ErrExists = errors.New("a dataset exists there")

// Upload copies the finished dataset in the local directory dir (a layout.Writer's output) to
// the store's prefix: every file but the manifest first, Concurrency at a time, each in one PUT
// or a multipart upload of PartSize parts (memory: about Concurrency x PartSize), and the
// manifest last, so the dataset appears whole or not at all. A dataset already at the prefix is
// refused unless force; with force its manifest goes first (no reader opens a mix of the two),
// and objects under the prefix that the new dataset does not have are removed at the end.
func (s *Store) Upload(ctx context.Context, dir string, force bool, progress func(done, total int64)) error {
	mkey := s.loc.Key(ManifestName)
	_, err := s.statObject(ctx, mkey)
	switch {
	case err == nil && !force:
		return fmt.Errorf("%s: %w (use --force to replace it)", s.Location(), ErrExists)
	case err == nil:
		if err := s.retry(ctx, func(ctx context.Context) error {
			return s.cl.RemoveObject(ctx, s.loc.Bucket, mkey, minio.RemoveObjectOptions{})
		}); err != nil {
			return s.describe(err, mkey)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	var files []string
	var total int64
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != ManifestName {
			files = append(files, rel)
			if st, err := d.Info(); err == nil {
				total += st.Size()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); err != nil {
		return fmt.Errorf("%s has no manifest: not a finished dataset", dir)
	}
	sort.Strings(files)
	if err := s.putAll(ctx, dir, files, total, progress); err != nil {
		return err
	}
	if err := s.putFile(ctx, dir, ManifestName); err != nil {
		return err
	}
	if force {
		return s.removeOthers(ctx, append(files, ManifestName))
	}
	return nil
}

// putAll uploads files from dir, Concurrency at a time; the first error stops the rest.
func (s *Store) putAll(ctx context.Context, dir string, files []string, total int64, progress func(done, total int64)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		done  int64
	)
	work := make(chan string)
	for range min(s.opt.Concurrency, max(1, len(files))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rel := range work {
				err := s.putFile(ctx, dir, rel)
				mu.Lock()
				if err != nil && first == nil {
					first = err
					cancel()
				}
				if st, serr := os.Stat(filepath.Join(dir, filepath.FromSlash(rel))); serr == nil {
					done += st.Size()
				}
				if progress != nil {
					progress(done, total)
				}
				mu.Unlock()
			}
		}()
	}
	for _, rel := range files {
		select {
		case work <- rel:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return first
}

// putFile uploads one file, retried whole like any request (but without a time limit per
// try: a large object takes as long as it takes; the connection's own timeouts still apply).
func (s *Store) putFile(ctx context.Context, dir, rel string) error {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
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
	err = s.retryNoTimeout(ctx, func(ctx context.Context) error {
		_, err := s.cl.Client.PutObject(ctx, s.loc.Bucket, key, io.NewSectionReader(f, 0, st.Size()), st.Size(), opt)
		return err
	})
	if err != nil {
		return fmt.Errorf("uploading %s: %w", s.url(key), s.describe(err, key))
	}
	return nil
}

// retryNoTimeout is retry with no time limit on each try (uploads of large objects).
func (s *Store) retryNoTimeout(ctx context.Context, fn func(context.Context) error) error {
	return s.retryFor(ctx, 0, fn)
}

// removeOthers deletes the objects under the prefix that are not in keep (relative paths):
// what a replaced dataset had and the new one has not.
func (s *Store) removeOthers(ctx context.Context, keep []string) error {
	want := map[string]bool{}
	for _, rel := range keep {
		want[s.loc.Key(rel)] = true
	}
	prefix := s.loc.Prefix
	if prefix != "" {
		prefix += "/"
	}
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

// statObject returns the object's facts, or an error wrapping fs.ErrNotExist.
func (s *Store) statObject(ctx context.Context, key string) (minio.ObjectInfo, error) {
	var oi minio.ObjectInfo
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		oi, err = s.cl.StatObject(ctx, s.loc.Bucket, key, minio.StatObjectOptions{})
		return err
	})
	if err != nil {
		return oi, s.describe(err, key)
	}
	return oi, nil
}
