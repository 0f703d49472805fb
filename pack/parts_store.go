package pack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blockfs/blockfs/source/objstore"

	"github.com/blockfs/blockfs/internal/fsync"
	"github.com/blockfs/blockfs/internal/userfile"
	"golang.org/x/sys/unix"
)

// partsOut is where a pack in parts goes, OUT: a local directory (dirOut) or an object store's
// prefix (storeOut). Paths are '/'-separated and relative to OUT.
type partsOut interface {
	// location names OUT in messages.
	location() string
	// read returns the file rel; an error wrapping fs.ErrNotExist when it is missing.
	read(rel string) ([]byte, error)
	// size returns the size of the file rel; an error wrapping fs.ErrNotExist when missing.
	size(rel string) (int64, error)
	// names returns the names of the files directly in the folder rel.
	names(rel string) ([]string, error)
	// write stores data as rel, whole or not at all.
	write(rel string, data []byte) error
	// remove removes the file rel, if it is there.
	remove(rel string) error
	// durable makes what was written so far durable, before a manifest vouches for it.
	durable() error
}

// dirOut is a pack in parts in a local directory.
type dirOut struct{ dir string }

func (d dirOut) location() string       { return d.dir }
func (d dirOut) path(rel string) string { return filepath.Join(d.dir, filepath.FromSlash(rel)) }

// read reads a regular file of at most maxPartFile bytes (the store's bound), opened without
// waiting: a FIFO or a device in a part's place (a hang, or /dev/zero's endless bytes) is
// refused, saying what it is.
func (d dirOut) read(rel string) ([]byte, error) { return userfile.ReadFile(d.path(rel), maxPartFile) }

// maxPartFile bounds a file a merge reads whole: a part's manifests and its blocks' ids.
const maxPartFile = 1 << 31

func (d dirOut) size(rel string) (int64, error) {
	st, err := os.Stat(d.path(rel))
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a regular file", d.path(rel))
	}
	return st.Size(), nil
}

func (d dirOut) names(rel string) ([]string, error) {
	ents, err := os.ReadDir(d.path(rel))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func (d dirOut) write(rel string, data []byte) error {
	p := d.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return writeAtomic(p, data)
}

func (d dirOut) remove(rel string) error {
	if err := os.Remove(d.path(rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (d dirOut) durable() error { return fsync.FS(d.dir) }

// storeOut is a pack in parts under an object store's prefix. Sizes and names come from one
// listing of the prefix, made at the first question (a merge lists once).
type storeOut struct {
	ctx    context.Context
	st     *objstore.Store
	listed map[string]int64
}

func (s *storeOut) location() string { return s.st.Location() }

func (s *storeOut) read(rel string) ([]byte, error) { return s.st.ReadFile(rel, maxPartFile) }

func (s *storeOut) list() error {
	if s.listed != nil {
		return nil
	}
	l, err := s.st.Objects(s.ctx)
	s.listed = l
	return err
}

func (s *storeOut) size(rel string) (int64, error) {
	if err := s.list(); err != nil {
		return 0, err
	}
	n, ok := s.listed[rel]
	if !ok {
		return 0, fmt.Errorf("%s: %w", s.st.Path(rel), fs.ErrNotExist)
	}
	return n, nil
}

func (s *storeOut) names(rel string) ([]string, error) {
	if err := s.list(); err != nil {
		return nil, err
	}
	var out []string
	for k := range s.listed {
		if dir, name := path.Split(k); strings.TrimSuffix(dir, "/") == rel {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w", s.st.Path(rel), fs.ErrNotExist)
	}
	return out, nil
}

func (s *storeOut) write(rel string, data []byte) error { return s.st.PutBytes(s.ctx, rel, data) }
func (s *storeOut) remove(rel string) error             { return s.st.Remove(s.ctx, rel) }
func (s *storeOut) durable() error                      { return nil }

// writeAtomic writes data to path through a temporary file beside it, synced and renamed
// over path, and syncs the folder.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return fsync.Dir(filepath.Dir(path))
}

// stamp returns the version of the file rel as a string: its device, inode, size, and
// modification and change times. A part packed again in its place gives other ones.
func (d dirOut) stamp(rel string) (string, error) {
	var st unix.Stat_t
	if err := unix.Lstat(d.path(rel), &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), nil
}

// stamper is a partsOut that can tell a file's version (a local directory; an object store's
// merge reads one listing and the objects it names).
type stamper interface {
	stamp(rel string) (string, error)
}

// watched is a partsOut whose files read or sized are remembered with their versions, before
// they are read, so that unchanged can tell whether any changed while the merge read them: a
// part packed again during the merge (its own blocks, ids and manifest new) would otherwise
// give a manifest over the new blocks with the old ones' ids and checksums.
type watched struct {
	partsOut
	st   stamper
	seen map[string]string
}

// watch returns out, watched where it can tell versions.
func watch(out partsOut) partsOut {
	if st, ok := out.(stamper); ok {
		return &watched{partsOut: out, st: st, seen: map[string]string{}}
	}
	return out
}

func (w *watched) note(rel string) {
	if _, ok := w.seen[rel]; !ok {
		w.seen[rel], _ = w.st.stamp(rel)
	}
}

func (w *watched) read(rel string) ([]byte, error) {
	w.note(rel)
	return w.partsOut.read(rel)
}

func (w *watched) size(rel string) (int64, error) {
	w.note(rel)
	return w.partsOut.size(rel)
}

// unchanged returns an error naming a file the merge read that has changed since.
func unchanged(out partsOut) error {
	w, ok := out.(*watched)
	if !ok {
		return nil
	}
	for _, rel := range slices.Sorted(maps.Keys(w.seen)) {
		if now, _ := w.st.stamp(rel); now != w.seen[rel] {
			return fmt.Errorf("%s changed while the parts were merged (a part packed again?): merge once every part's pack has finished", w.path(rel))
		}
	}
	return nil
}

func (w *watched) path(rel string) string { return w.location() + "/" + rel }
