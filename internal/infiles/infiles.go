// Package infiles finds the files blockfs reads as input: which names a folder's walk leaves
// out (IsJunk), folders and globs of WebDataset or TFRecord shards (DetectShards, List), and
// a shard to index (Shard). pack reads inputs with these rules and a mount of shards served
// in place lists them with the same ones, so that `blockfs pack DIR` and `blockfs mount DIR`
// agree on what a folder holds; neither needs the other for it.
package infiles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// JunkNames are the names of files and folders that a folder pack skips unless
// Options.AllFiles is set, besides every hidden name (one that starts with '.', which covers
// .DS_Store, macOS's ._* AppleDouble files, .git/ and .ipynb_checkpoints/) and every name that
// ends with '~' (editors' backups). They are compared without regard to case, as the systems
// that make them do. A folder in the list is skipped whole. docs/USAGE.md lists the same.
var JunkNames = []string{
	"Thumbs.db", "ehthumbs.db", "desktop.ini", // Windows Explorer
	"__MACOSX",                                  // the resource forks of a zip made on a Mac
	"$RECYCLE.BIN", "System Volume Information", // a Windows drive's root
	"lost+found", // an ext4 filesystem's root
}

// IsJunk reports whether a file or folder of this name is skipped by default: a hidden name,
// a backup (name~) or one of JunkNames.
func IsJunk(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") {
		return true
	}
	for _, j := range JunkNames {
		if strings.EqualFold(name, j) {
			return true
		}
	}
	return false
}

// The formats of shards: inputs that come as many files of one extension, each a run of
// whole samples, which pack packs and a mount serves in place.
const (
	WebDataset = "webdataset" // tar shards: a sample per key, a field per extension
	TFRecord   = "tfrecord"   // TFRecord files: one field "record", CRC-checked
)

// ShardExts are the shard formats' file extensions (lower case; a name's is compared without
// regard to case).
var ShardExts = map[string][]string{WebDataset: {".tar"}, TFRecord: {".tfrecord", ".tfrecords"}}

// ShardFormat returns the shard format that name's extension names.
func ShardFormat(name string) (string, bool) {
	ext := strings.ToLower(filepath.Ext(name))
	for f, exts := range ShardExts {
		if slices.Contains(exts, ext) {
			return f, true
		}
	}
	return "", false
}

// errNotShards stops DetectShards' walk at the first file that is not a shard.
var errNotShards = errors.New("not a folder of shards")

// DetectShards returns the shard format of the folder src and how many shards it holds:
// WebDataset when every file a folder pack would take (IsJunk's names left out, as without
// --all-files; symlinks and other special files, which neither reads, too) is a .tar shard,
// TFRecord when every one is a .tfrecord. False for anything else, a folder of no files
// included: such a folder is files, as --format files forces.
func DetectShards(src string) (string, int, bool) {
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return "", 0, false
	}
	var format string
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case p == src:
			return nil
		case d.IsDir() && IsJunk(d.Name()):
			return filepath.SkipDir
		case d.IsDir(), IsJunk(d.Name()), !d.Type().IsRegular():
			return nil
		}
		f, ok := ShardFormat(p)
		if !ok || (format != "" && f != format) {
			return errNotShards
		}
		format, n = f, n+1
		return nil
	})
	if err != nil || n == 0 {
		return "", 0, false
	}
	return format, n, true
}

// List expands src into the files of format (named by its extensions exts) to read, in
// order: a file; a glob ("shards/*.tar", quoted so that the shell leaves it), sorted; or a
// folder's files with those extensions, sorted by path (hidden files and folders left out).
// An empty result is an error.
func List(src, format string, exts []string) ([]string, error) {
	var paths []string
	if st, err := os.Stat(src); err == nil && st.IsDir() {
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != src && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") && slices.Contains(exts, strings.ToLower(filepath.Ext(p))) {
				paths = append(paths, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("%s has no %s files (%s)", src, format, strings.Join(exts, ", "))
		}
		slices.Sort(paths)
		return paths, nil
	} else if err == nil {
		return []string{src}, nil
	}
	if IsGlob(src) {
		return GlobSorted(src)
	}
	return nil, fmt.Errorf("cannot read the input %s: no such file or directory", src)
}

// IsGlob reports whether s has glob syntax.
func IsGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// GlobSorted returns the files a glob matches, sorted by name; one that matches nothing is
// an error.
func GlobSorted(pattern string) ([]string, error) {
	m, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("bad glob %q: %w", pattern, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%s matches no file", pattern)
	}
	slices.Sort(m)
	return m, nil
}

// Shard is one shard to index: its name relative to where the shards are ('/'-separated),
// what identifies its bytes, and how to read it from its start.
type Shard struct {
	Name    string
	Size    int64
	MtimeNs int64  // a local file's
	ETag    string // an object's
	Open    func(ctx context.Context) (io.ReadCloser, error)
}
