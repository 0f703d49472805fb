package pack

import (
	"fmt"
	"path"
	"strings"

	"github.com/blockfs/blockfs/internal/infiles"

	"github.com/blockfs/blockfs/internal/optname"
)

// A pattern is one --include or --exclude glob. As in .gitignore, a pattern without a '/'
// matches a name at any depth, and one with a '/' (a leading one included) matches the path
// relative to the folder ('/'-separated). Each part between slashes is a path.Match pattern
// ('*', '?', '[a-z]', '\' to escape); a part "**" matches any number of folders (a trailing
// "/**" one or more: what is inside a folder, not the folder itself). A trailing '/' makes it
// match folders only.
type pattern struct {
	text    string   // as given
	name    string   // the glob of a pattern without '/', matched against names
	parts   []string // the parts of a pattern with '/', matched against relative paths
	dirOnly bool
}

func parsePattern(s string) (pattern, error) {
	p := pattern{text: s}
	s = strings.TrimPrefix(s, "./")
	if strings.HasSuffix(s, "/") {
		p.dirOnly = true
		s = strings.TrimRight(s, "/")
	}
	anchored := strings.HasPrefix(s, "/")
	s = strings.TrimLeft(s, "/")
	if s == "" {
		return p, fmt.Errorf("pattern %q matches nothing (give a glob such as '*.png' or 'cat/**')", p.text)
	}
	parts := strings.Split(s, "/")
	for _, part := range parts {
		if _, err := path.Match(part, ""); err != nil || part == "" {
			return p, fmt.Errorf("pattern %q is not a glob (use *, ?, [a-z] and ** between single slashes, \\ to escape)", p.text)
		}
	}
	if len(parts) > 1 || anchored || parts[0] == "**" {
		p.parts = parts
	} else {
		p.name = parts[0]
	}
	return p, nil
}

// match reports whether the pattern matches the file or folder at rel (relative to the folder
// packed, '/'-separated; name is its last part).
func (p pattern) match(rel, name string, dir bool) bool {
	if p.dirOnly && !dir {
		return false
	}
	if p.parts == nil {
		ok, _ := path.Match(p.name, name)
		return ok
	}
	return matchParts(p.parts, strings.Split(rel, "/"))
}

// matchParts matches pattern parts against path parts; "**" takes zero or more parts, one
// or more where it is the last part of the pattern.
func matchParts(pat, parts []string) bool {
	if len(pat) == 0 {
		return len(parts) == 0
	}
	if pat[0] == "**" {
		least := 0
		if len(pat) == 1 {
			least = 1
		}
		for k := least; k <= len(parts); k++ {
			if matchParts(pat[1:], parts[k:]) {
				return true
			}
		}
		return false
	}
	if len(parts) == 0 {
		return false
	}
	if ok, _ := path.Match(pat[0], parts[0]); !ok {
		return false
	}
	return matchParts(pat[1:], parts[1:])
}

// selection decides which entries of a folder pack takes (Options.Include, Exclude,
// AllFiles) and counts what it leaves out.
type selection struct {
	include, exclude []pattern
	allFiles         bool
	skipped          Skipped
}

func newSelection(opt Options) (*selection, error) {
	s := &selection{allFiles: opt.AllFiles}
	for _, list := range []struct {
		option string
		in     []string
		out    *[]pattern
	}{{"include", opt.Include, &s.include}, {"exclude", opt.Exclude, &s.exclude}} {
		for _, t := range list.in {
			p, err := parsePattern(t)
			if err != nil {
				return nil, optname.Errorf(list.option, "%s: %w", optname.Flag(list.option), err)
			}
			*list.out = append(*list.out, p)
		}
	}
	return s, nil
}

// skipDir reports whether the folder at rel is left out, whole, and counts it if so.
func (s *selection) skipDir(rel, name string) bool {
	switch {
	case !s.allFiles && infiles.IsJunk(name):
		s.skipped.addJunk(rel + "/")
	case matchAny(s.exclude, rel, name, true):
		s.skipped.Filtered++
	default:
		return false
	}
	return true
}

// takeFile reports whether the regular file at rel is packed, and counts it if not.
func (s *selection) takeFile(rel, name string) bool {
	switch {
	case !s.allFiles && infiles.IsJunk(name):
		s.skipped.addJunk(rel)
	case matchAny(s.exclude, rel, name, false),
		len(s.include) > 0 && !matchAny(s.include, rel, name, false):
		s.skipped.Filtered++
	default:
		return true
	}
	return false
}

func matchAny(ps []pattern, rel, name string, dir bool) bool {
	for _, p := range ps {
		if p.match(rel, name, dir) {
			return true
		}
	}
	return false
}

// Skipped counts what a folder pack left out, by reason.
type Skipped struct {
	Junk     int      // hidden or junk files and folders (infiles.IsJunk); a folder counts once
	Filtered int      // files (and folders, by --exclude) left out by Include and Exclude
	Special  int      // symlinks and other entries that are not regular files or folders
	Examples []string // the first few junk paths, folders with a trailing '/'
}

// maxExamples is how many junk paths Skipped keeps to show.
const maxExamples = 3

func (s *Skipped) addJunk(rel string) {
	s.Junk++
	if len(s.Examples) < maxExamples {
		s.Examples = append(s.Examples, rel)
	}
}

// String says what was skipped in one line, for pack's summary ("" when nothing was):
// "skipped 3 hidden or junk files and folders (.DS_Store, .git/, Thumbs.db; --all-files
// keeps them), 2 by --include/--exclude, 1 symlink or special file".
func (s Skipped) String() string {
	var parts []string
	if s.Junk > 0 {
		ex := strings.Join(s.Examples, ", ")
		if more := s.Junk - len(s.Examples); more > 0 {
			ex += fmt.Sprintf(" and %d more", more)
		}
		parts = append(parts, fmt.Sprintf("%d hidden or junk %s (%s; %s keeps them)", s.Junk, plural(s.Junk, "file or folder", "files and folders"), ex, optname.Flag("all-files")))
	}
	if s.Filtered > 0 {
		parts = append(parts, fmt.Sprintf("%d by %s/%s", s.Filtered, optname.Flag("include"), optname.Flag("exclude")))
	}
	if s.Special > 0 {
		parts = append(parts, fmt.Sprintf("%d %s (not followed)", s.Special, plural(s.Special, "symlink or special file", "symlinks or special files")))
	}
	if len(parts) == 0 {
		return ""
	}
	return "skipped " + strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
