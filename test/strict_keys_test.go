package test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMixtureFileKeys: a mixture file's keys are compared as encoding/json fills it. Its
// fields match keys folded as encoding/json folds them, so "\u017fources" (with a long s)
// is "sources" twice and refused, not the second list of sources served silently (and
// "option\u017f" is "options" twice). A source's
// "options" is a map, where keys that differ in case are two keys: "Seed" beside "seed" is
// an unknown option, said as such, and an exact repeat stays a key twice.
func TestMixtureFileKeys(t *testing.T) {
	a, b := packRaw(t, 8, "64KiB"), packRaw(t, 8, "64KiB")
	dir := t.TempDir()
	mnt := t.TempDir()
	src := func(d, opts string) string { return `{"data": "` + d + `", "weight": 1` + opts + `}` }
	for _, c := range []struct{ name, doc, want string }{
		{"long s", `{"sources": [` + src(a.dir, "") + `], "\u017fources": [` + src(b.dir, "") + `]}`,
			"has key \"\u017fources\" twice in the top-level object (at byte "},
		{"options twice", `{"sources": [` + src(a.dir, `, "options": {}, "option\u017f": {"seed": 3}`) + `]}`,
			"has key \"option\u017f\" twice in sources[0] (at byte "},
		{"options differing in case", `{"sources": [` + src(a.dir, `, "options": {"seed": 1, "Seed": 2}`) + `]}`,
			`: source 0 (` + a.dir + `): unknown option "Seed" (a source takes `},
		{"an option twice", `{"sources": [` + src(a.dir, `, "options": {"Seed": 1, "Seed": 2}`) + `]}`,
			`has key "Seed" twice in sources[0].options (at byte `},
	} {
		t.Run(c.name, func(t *testing.T) {
			mix := filepath.Join(dir, c.name+".json")
			require.NoError(t, os.WriteFile(mix, []byte(c.doc), 0o644))
			for _, args := range [][]string{{"mount", mix, mnt}, {"info", mix}} {
				refusedInOneLine(t, 2, args, "blockfs: "+mix)
				refusedInOneLine(t, 2, args, c.want)
			}
			assert.False(t, isMounted(mnt))
		})
	}
}
