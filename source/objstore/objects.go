package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
)

// Objects lists the objects under the prefix: each one's path relative to it and its size.
// (pack --merge reads a pack in parts' files this way.)
func (s *Store) Objects(ctx context.Context) (map[string]int64, error) {
	prefix := s.key("") // "PREFIX/", or "" for a whole bucket
	out := map[string]int64{}
	err := s.retry(ctx, func(ctx context.Context, progress func()) error {
		clear(out)
		return s.cl.List(ctx, prefix, func(o Object) error {
			progress()
			out[strings.TrimPrefix(o.Key, prefix)] = o.Size
			return nil
		})
	})
	if err != nil {
		return nil, s.describe(err, prefix)
	}
	return out, nil
}

// PutBytes stores data as the object rel of the prefix, in one request (a small file: a part
// manifest, a merged dataset's ids and manifest), retried whole like any request.
func (s *Store) PutBytes(ctx context.Context, rel string, data []byte) error {
	key := s.key(rel)
	err := s.retryNoTimeout(ctx, func(ctx context.Context, _ func()) error {
		return s.cl.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
	})
	if err != nil {
		return fmt.Errorf("uploading %s: %w", s.url(key), s.describe(err, ""))
	}
	return nil
}

// Create is PutBytes only where there is no object rel (Client.Create): ErrObjectExists where there
// is. A try whose answer was lost may have created it: the caller tells its own object by what
// it wrote.
func (s *Store) Create(ctx context.Context, rel string, data []byte) error {
	key := s.key(rel)
	err := s.retry(ctx, func(ctx context.Context, _ func()) error {
		return s.cl.Create(ctx, key, bytes.NewReader(data), int64(len(data)))
	})
	switch {
	case err == nil:
		return nil
	case s.cl.Answer(err).Kind == Changed:
		return fmt.Errorf("%s: %w", s.url(key), ErrObjectExists)
	}
	return fmt.Errorf("creating %s: %w", s.url(key), s.describe(err, ""))
}

// Remove deletes the object rel of the prefix; a missing one is not an error.
func (s *Store) Remove(ctx context.Context, rel string) error {
	key := s.key(rel)
	err := s.retry(ctx, func(ctx context.Context, _ func()) error {
		return s.cl.Remove(ctx, key)
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
	key := s.key(rel)
	var body io.ReadCloser
	err := s.retry(ctx, func(ctx context.Context, _ func()) error {
		b, _, err := s.cl.Get(context.WithoutCancel(ctx), key, 0, -1, etag)
		body = b
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.url(key), s.describe(err, key))
	}
	return body, nil
}
