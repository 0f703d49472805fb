package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/internal/fsync"
	"golang.org/x/sys/unix"
)

// Commit closes the last block, writes and syncs the manifest, and renames the temporary
// directory to the destination (replacing it only if Create was given force: in one
// exchange of the two where the filesystem can, so the destination is never missing). If a
// step fails before the rename, Commit removes everything the writer wrote and leaves the
// destination as it was. Two errors come after it, with the new dataset in place: failing to
// remove the replaced one (nil manifest) and failing to sync the parent directory (non-nil
// manifest). Either way the writer is finished. A nested writer (a field's) only writes its
// manifest: its owner syncs and renames the whole.
func (w *Writer) Commit() (*Manifest, error) {
	if w.done {
		return nil, errors.New("writer is closed")
	}
	w.done = true
	steps := []func() error{
		w.flush, // the last block, partly filled
		w.collectBlocks,
		w.validate,
		w.closeNames,
		w.syncBlocks,
		w.writeManifest,
		w.syncTempDirs,
		w.replace,
	}
	if w.opt.nested {
		steps = []func() error{w.flush, w.collectBlocks, w.validate, w.closeNames,
			func() error { return writeFile(filepath.Join(w.tmp, ManifestName), ManifestJSON(&w.m)) }}
	}
	for _, step := range steps {
		if err := step(); err != nil {
			w.Abort()
			return nil, err
		}
	}
	if w.opt.nested {
		w.tmp = "" // the owner's now: Abort must not remove it
		return &w.m, nil
	}
	return &w.m, fsync.Dir(filepath.Dir(w.dst))
}

// collectBlocks waits until every block file is written and copies the checksum of each data
// file, computed by the background writer, into the manifest.
func (w *Writer) collectBlocks() error {
	if err := w.bg.Stop(); err != nil {
		return err
	}
	for i := range w.m.Blocks {
		w.m.Blocks[i].CRC32C = w.dataCRC[i]
	}
	w.comp.finish(&w.m)
	return nil
}

// ErrNoRecords is a pack that wrote no record: a dataset has one at least.
var ErrNoRecords = errors.New("the input has no records: nothing to pack")

// validate checks the finished manifest as Open will, and says so plainly when there is no
// record at all.
func (w *Writer) validate() error {
	err := w.m.Validate(w.dst)
	if err != nil && w.m.Records == 0 {
		return ErrNoRecords
	}
	return err
}

// syncBlocks makes every file written so far durable with one syncfs, before the manifest that
// vouches for them is written.
func (w *Writer) syncBlocks() error { return fsync.FS(w.tmp) }

// writeManifest writes the manifest, the dataset's last file, and syncs it.
func (w *Writer) writeManifest() error {
	return writeFileSync(filepath.Join(w.tmp, ManifestName), ManifestJSON(&w.m))
}

// syncTempDirs syncs the blocks directory and the temporary directory, so their entries are
// durable before the rename publishes them.
func (w *Writer) syncTempDirs() error {
	for _, d := range []string{filepath.Join(w.tmp, "blocks"), w.tmp} {
		if err := fsync.Dir(d); err != nil {
			return err
		}
	}
	return nil
}

// replace moves the finished directory to dst (replaceDir), then removes the dataset it
// replaced and lets go of the temporary directory's lock.
func (w *Writer) replace() error {
	if err := replaceDir(w.tmp, w.dst); err != nil {
		return err
	}
	return w.td.release()
}

// renameExchange swaps a and b in one rename (renameat2 RENAME_EXCHANGE); a variable so that
// tests can refuse it, as some filesystems do.
var renameExchange = func(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// replaceDir moves the finished directory tmp to dst. An existing dst is exchanged with tmp
// in one rename, so that dst is never missing, and tmp then holds the replaced dataset for
// the caller to remove (tempDir.release). Where the filesystem cannot exchange (EINVAL,
// ENOSYS, EOPNOTSUPP), dst is first renamed aside to tmp.old, which release removes too, and
// for a moment dst is missing.
func replaceDir(tmp, dst string) error {
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		return os.Rename(tmp, dst)
	} else if err != nil {
		return err
	}
	err := renameExchange(tmp, dst)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("cannot replace %s: %w", dst, err)
	}
	old := tmp + oldSuffix
	if err := os.Rename(dst, old); err != nil {
		return fmt.Errorf("cannot move the existing %s aside: %w", dst, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Rename(old, dst)
		return err
	}
	return nil
}

// Abort removes everything written so far. Safe to call more than once and after Commit.
func (w *Writer) Abort() {
	w.done = true
	_ = w.bg.Stop()
	if w.names != nil {
		w.names.Close()
	}
	if w.td != nil {
		_ = w.td.release()
	} else if w.tmp != "" {
		_ = os.RemoveAll(w.tmp)
	}
}

// ManifestJSON returns the manifest as the writer would store it (for tests and tools).
func ManifestJSON(m *Manifest) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	_ = enc.Encode(m)
	return buf.Bytes()
}

func writeFileSync(path string, data []byte) error {
	if err := writeFile(path, data); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
