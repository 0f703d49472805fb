package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Commit closes the last block, writes and syncs the manifest, and renames the temporary
// directory to the destination (replacing it only if Create was given force). If a step fails
// before the rename, Commit removes everything the writer wrote and leaves the destination as
// it was. Two errors come after it, with the new dataset in place: failing to remove the
// replaced one (nil manifest) and failing to sync the parent directory (non-nil manifest).
// Either way the writer is finished.
func (w *Writer) Commit() (*Manifest, error) {
	if w.done {
		return nil, errors.New("writer is closed")
	}
	w.done = true
	for _, step := range []func() error{
		w.flush, // the last block, partly filled
		w.collectBlocks,
		w.validate,
		w.closeNames,
		w.syncBlocks,
		w.writeManifest,
		w.syncTempDirs,
		w.replace,
	} {
		if err := step(); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return &w.m, syncDir(filepath.Dir(w.dst))
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
	return nil
}

// validate checks the finished manifest as Open will, and says so plainly when there is no
// record at all.
func (w *Writer) validate() error {
	err := w.m.Validate(w.dst)
	if err != nil && w.m.Records == 0 {
		return errors.New("the input has no records: nothing to pack")
	}
	return err
}

// syncBlocks makes every file written so far durable with one syncfs, before the manifest that
// vouches for them is written.
func (w *Writer) syncBlocks() error { return syncFS(w.tmp) }

// writeManifest writes the manifest, the dataset's last file, and syncs it.
func (w *Writer) writeManifest() error {
	return writeFileSync(filepath.Join(w.tmp, ManifestName), ManifestJSON(&w.m))
}

// syncTempDirs syncs the blocks directory and the temporary directory, so their entries are
// durable before the rename publishes them.
func (w *Writer) syncTempDirs() error {
	for _, d := range []string{filepath.Join(w.tmp, "blocks"), w.tmp} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// replace moves the finished directory to dst. An existing dst is first renamed aside and
// removed only once the new dataset is in place.
func (w *Writer) replace() error { return replaceDir(w.tmp, w.dst) }

// replaceDir moves the finished directory tmp to dst, an existing dst first renamed aside and
// removed only once the new one is in place.
func replaceDir(tmp, dst string) error {
	old := ""
	if _, err := os.Lstat(dst); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dst, old); err != nil {
			return fmt.Errorf("cannot move the existing %s aside: %w", dst, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		if old != "" {
			_ = os.Rename(old, dst)
		}
		return err
	}
	if old != "" {
		return os.RemoveAll(old)
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
	if w.tmp != "" {
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

// syncFS flushes everything written to the filesystem holding dir.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
