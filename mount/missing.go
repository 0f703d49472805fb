package mount

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/blockfs/blockfs/internal/near"
)

// notExist is the error for data that names nothing: one line saying so; it wraps
// fs.ErrNotExist.
type notExist struct{ msg string }

func (e notExist) Error() string { return e.msg }
func (e notExist) Unwrap() error { return fs.ErrNotExist }

// missing returns the error for data that does not exist, asked for with flags that need
// it (why: "--record-size serves an existing file in place"), naming it and a near name where
// one exists; nil when path exists.
func missing(path, why string) error {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return notExist{fmt.Sprintf("%s does not exist: %s; check the path%s", path, why, nearHint(path))}
}

// maxNearEntries bounds the entries of a folder read for a near name.
const maxNearEntries = 4096

// nearHint returns " (did you mean X?)" for the name nearest to path's in its folder (the
// same but for case, an extension, or two letters), " (FOLDER does not exist either)" when its
// folder is missing too, else "".
func nearHint(path string) string {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf(" (%s does not exist either)", filepath.Clean(dir))
		}
		return ""
	}
	defer f.Close()
	names, _ := f.Readdirnames(maxNearEntries)
	best, bestScore := "", 3
	for _, name := range names {
		if s := nearness(base, name); s < bestScore {
			best, bestScore = name, s
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", filepath.Join(filepath.Dir(path), best))
}

// nearness scores how near name is to the base name asked for: 0 the same but for case, 1
// the same stem with another extension (or none), 2 one or two letters apart (names of 4 or
// more); 3 not near.
func nearness(base, name string) int {
	switch {
	case strings.EqualFold(base, name):
		return 0
	case stem(base) == stem(name):
		return 1
	case len(base) >= 4 && near.Distance(base, name, 2) <= 2:
		return 2
	}
	return 3
}

// stem is a file name without its extension.
func stem(name string) string { return strings.TrimSuffix(name, filepath.Ext(name)) }
