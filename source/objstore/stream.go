package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/blockfs/blockfs/internal/optname"
)

// ErrExists: a pack found a dataset at the prefix and was not asked to replace it.
var ErrExists = errors.New("a dataset exists there")

// Stream writes a dataset to the store's prefix file by file as it is made, manifest last: Add
// (a layout.Writer's BlockDone) queues a finished block's files, which Concurrency workers
// upload and then delete locally; Finish uploads what is left and the manifest; Abort stops
// and removes what was uploaded. Memory: about Concurrency x PartSize; local disk: at most
// 2 x Concurrency files queued or uploading. Add, Finish and Abort are called one at a time.
type Stream struct {
	s        *Store
	force    bool
	spool    string // where Add moves files to while they wait and upload
	manifest string // the manifest Finish uploads last: ManifestName or FieldsManifestName

	ctx    context.Context
	cancel context.CancelFunc
	work   chan upload
	wg     sync.WaitGroup

	mu   sync.Mutex
	err  error    // the first upload error (guarded by mu)
	sent []string // relative paths uploaded, for Abort and Finish (guarded by mu)
}

// upload is one file for a worker: path, stored as rel, removed once uploaded if remove is set.
type upload struct {
	path, rel string
	remove    bool
}

// Begin starts writing a dataset at the prefix; Add uses the directory spool, which must exist
// on the filesystem of the files it is given. A dataset there (either manifest) is refused
// unless force; with force its manifest is removed first, so no reader opens a mix of the old
// and new objects (the old dataset is gone from then on, whether the pack succeeds or not).
func (s *Store) Begin(ctx context.Context, force bool, spool string) (*Stream, error) {
	return s.begin(ctx, force, spool, ManifestName)
}

// BeginFields is Begin for a dataset with fields, whose manifest is FieldsManifestName.
func (s *Store) BeginFields(ctx context.Context, force bool, spool string) (*Stream, error) {
	return s.begin(ctx, force, spool, FieldsManifestName)
}

func (s *Store) begin(ctx context.Context, force bool, spool, manifest string) (*Stream, error) {
	for _, name := range []string{ManifestName, FieldsManifestName} {
		mkey := s.key(name)
		_, err := s.statObject(ctx, mkey)
		switch {
		case err == nil && !force:
			return nil, fmt.Errorf("%s: %w (use %s to replace it)", s.Location(), ErrExists, optname.Flag("force"))
		case err == nil:
			if err := s.retry(ctx, func(ctx context.Context, _ func()) error {
				return s.cl.Remove(ctx, mkey)
			}); err != nil {
				return nil, s.describe(err, mkey)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	u := &Stream{s: s, force: force, spool: spool, manifest: manifest, work: make(chan upload, s.opt.Concurrency)}
	u.ctx, u.cancel = context.WithCancel(ctx)
	for range s.opt.Concurrency {
		u.wg.Add(1)
		go u.worker()
	}
	return u, nil
}

// Add moves the files dir/rel into the stream's spool directory and queues them for upload,
// to be deleted once uploaded (the signature of layout.WriterOptions.BlockDone; the move frees
// the writer to rename its directory while they upload). It waits while the queue is full and
// returns the first upload error, if any.
func (u *Stream) Add(dir string, files []string) error { return u.AddUnder(dir, files, "") }

// AddUnder is Add of files stored under prefix (slash-terminated, "fields/NAME/"): the local
// file dir/rel is uploaded as prefix+rel.
func (u *Stream) AddUnder(dir string, files []string, prefix string) error {
	for _, rel := range files {
		path := filepath.Join(u.spool, strings.ReplaceAll(prefix+rel, "/", "_"))
		if err := os.Rename(filepath.Join(dir, filepath.FromSlash(rel)), path); err != nil {
			return fmt.Errorf("cannot move %s aside for upload: %w", rel, err)
		}
		if err := u.queue(upload{path: path, rel: prefix + rel, remove: true}); err != nil {
			_ = os.Remove(path)
			return err
		}
	}
	return u.failed()
}

// queue hands one file to the workers, unless the stream has failed or is cancelled.
func (u *Stream) queue(up upload) error {
	if err := u.failed(); err != nil {
		return err
	}
	u.mu.Lock()
	work := u.work
	u.mu.Unlock()
	if work == nil {
		return errors.New("the upload is over")
	}
	select {
	case work <- up:
		return nil
	case <-u.ctx.Done():
		if err := u.failed(); err != nil {
			return err
		}
		return u.ctx.Err()
	}
}

// worker uploads queued files until the queue closes; after the first error it skips the rest.
func (u *Stream) worker() {
	defer u.wg.Done()
	for up := range u.work {
		if u.failed() != nil || u.ctx.Err() != nil {
			continue
		}
		err := u.s.putFile(u.ctx, up.path, up.rel)
		if up.remove {
			_ = os.Remove(up.path) // uploaded, or abandoned with the pack
		}
		u.mu.Lock()
		switch {
		case err == nil:
			u.sent = append(u.sent, up.rel)
		case u.ctx.Err() != nil:
			// Cancelled while in flight: the store may have taken the object all the same
			// (the request arrived, its answer did not), so Abort removes it too.
			u.sent = append(u.sent, up.rel)
		case u.err == nil:
			u.err = err
			u.cancel()
		}
		u.mu.Unlock()
	}
}

// failed returns the first upload error, or nil.
func (u *Stream) failed() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// Finish uploads the files of the finished dataset in dir that were not added (every file but
// the manifest; they stay on disk), waits for all uploads, then uploads the manifest: the
// dataset appears whole. With force, objects under the prefix the new dataset does not have
// are removed after that. On an error the stream is aborted.
func (u *Stream) Finish(dir string) error {
	defer u.cancel()
	if err := u.finish(dir); err != nil {
		u.Abort()
		return err
	}
	if u.force {
		return u.s.removeOthers(u.ctx, append(u.sent, u.manifest))
	}
	return nil
}

// finish is Finish up to and including the manifest.
func (u *Stream) finish(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, u.manifest)); err != nil {
		return fmt.Errorf("%s has no manifest: not a finished dataset", dir)
	}
	rest, err := localFiles(dir, u.manifest)
	if err != nil {
		return err
	}
	for _, rel := range rest {
		if err := u.queue(upload{path: filepath.Join(dir, filepath.FromSlash(rel)), rel: rel}); err != nil {
			return err
		}
	}
	if err := u.wait(); err != nil {
		return err
	}
	return u.s.putFile(u.ctx, filepath.Join(dir, u.manifest), u.manifest)
}

// wait closes the queue, waits for the workers and returns the first upload error. Safe to
// call more than once.
func (u *Stream) wait() error {
	u.mu.Lock()
	w := u.work
	u.work = nil
	u.mu.Unlock()
	if w != nil {
		close(w)
	}
	u.wg.Wait()
	if err := u.failed(); err != nil {
		return err
	}
	return u.ctx.Err()
}

// Abort stops the uploads and removes, best effort, the objects this stream uploaded (never
// the manifest: it is written last, by Finish). Objects of a dataset replaced with force stay
// where the new one did not overwrite them. Safe to call more than once.
func (u *Stream) Abort() {
	u.cancel()
	_ = u.wait()
	u.mu.Lock()
	sent := u.sent
	u.sent = nil
	u.mu.Unlock()
	ctx := context.WithoutCancel(u.ctx)
	for _, rel := range sent {
		_ = u.s.retry(ctx, func(ctx context.Context, _ func()) error {
			return u.s.cl.Remove(ctx, u.s.key(rel))
		})
	}
}

// localFiles lists the files under dir but the manifest (dir's own), as sorted slash-separated
// relative paths.
func localFiles(dir, manifest string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); rel != manifest {
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}
