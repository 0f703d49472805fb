package diskcache

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Room returns what a cache in dir may use when its bound is not given: 90% of the free space
// of the filesystem of dir (or of its nearest existing parent) plus what the files cached in
// dir's own directory (this user's) hold already. It creates nothing.
func Room(dir string) int64 { return Free(dir) + Cached(dir) }

// Free returns nine tenths of the space free for an unprivileged user on the filesystem of dir
// (or of its nearest existing parent).
func Free(dir string) int64 {
	p := dir
	var fs unix.Statfs_t
	for unix.Statfs(p, &fs) != nil && p != filepath.Dir(p) {
		p = filepath.Dir(p)
	}
	return int64(fs.Bavail) * fs.Bsize / 10 * 9
}

// Cached returns the bytes of the cached files a disk cache at dir holds now.
func Cached(dir string) int64 {
	var n int64
	files, _ := filepath.Glob(filepath.Join(subDir(dir), "*", "*"+fileSuffix))
	for _, f := range files {
		if st, err := os.Lstat(f); err == nil && st.Mode().IsRegular() && fileRE.MatchString(st.Name()) {
			n += st.Size()
		}
	}
	return n
}
