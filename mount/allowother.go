package mount

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/blockfs/blockfs/layout"
)

// With --allow-other every user of the machine may read the mount, and the daemon reads the
// dataset with its own rights: a dataset its files keep from other users (pack leaves a
// dataset as private as its umask; a home directory is often 0700) would be served to them.
// checkAllowOther refuses that unless the user opts in with --allow-other-unreadable. It
// checks mode bits (not ACLs, nor the group: allow_other opens the mount to every user, not to
// a group): every file the mount reads must be readable by others, and every directory above
// it searchable by them. Data in an object store has no such bits: it is read with the
// mounting user's credentials, so it needs the opt-in too.

// checkAllowOther returns a usage error when opt asks for --allow-other over data that other
// users cannot read themselves, and nil otherwise.
func checkAllowOther(opt Options, loc Location, ds *layout.Dataset) error {
	if !opt.AllowOther || opt.AllowOtherUnreadable {
		return nil
	}
	optIn := "make the data readable by others (chmod o+r on its files, o+x on its directories), or give " + flag("allow-other-unreadable") + " to serve it to every user anyway"
	if loc.Kind == Remote {
		return Usagef(flag("allow-other")+": %s is read with your credentials, which other users may not have; give "+flag("allow-other-unreadable")+" to serve it to every user anyway", loc.Name)
	}
	files := datasetFiles(ds, loc)
	dirs := map[string]bool{}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf(flag("allow-other")+": %w", err)
		}
		if st.Mode().Perm()&0o004 == 0 {
			return Usagef(flag("allow-other")+": other users cannot read %s (mode %04o), and through the mount they could; %s", f, st.Mode().Perm(), optIn)
		}
		for d := filepath.Dir(f); !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			st, err := os.Stat(d)
			if err != nil {
				return fmt.Errorf(flag("allow-other")+": %w", err)
			}
			if st.Mode().Perm()&0o001 == 0 {
				return Usagef(flag("allow-other")+": other users cannot reach %s (directory %s is mode %04o), and through the mount they could read it; %s", f, d, st.Mode().Perm(), optIn)
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return nil
}

// datasetFiles returns the local files a mount of ds reads, resolved: the file served in
// place, or a pack's manifest, block files and names file.
func datasetFiles(ds *layout.Dataset, loc Location) []string {
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		if real, err := filepath.EvalSymlinks(name); err == nil {
			name = real
		}
		out = append(out, name)
	}
	if loc.Kind == Dir {
		add(filepath.Join(loc.Abs, layout.ManifestName))
	}
	n := layout.NamesFile(ds.Blocks())
	for id := layout.FileID(0); id <= n; id++ {
		f, ok := ds.File(id)
		if !ok {
			continue
		}
		add(f.Name)
		for _, p := range f.Parts {
			add(p.Name)
		}
	}
	return out
}
