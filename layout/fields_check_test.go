package layout

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A fields manifest whose field is named as a path ("../x", "a/b") or a sidecar, or that has
// a key twice, is refused: fields/NAME must be a directory of the dataset, and the file must
// mean one thing.
func TestFieldsManifestNamesAndKeys(t *testing.T) {
	entry := func(name, dir string) string {
		return `{"name":"` + name + `","kind":"variable","dir":"` + dir + `"}`
	}
	doc := func(fields string) string {
		return `{"format":"blockfs-fields","version":1,"records":1,"fields":[` + fields + `]}`
	}
	for _, c := range []struct{ body, want string }{
		{doc(entry("../x", "x")), `field name "../x" is not one pack writes`},
		{doc(entry("../fields/a", "fields/a")), `field name "../fields/a"`},
		{doc(entry("a/b", "fields/a/b")), `field name "a/b"`},
		{doc(entry(".hidden", "fields/.hidden")), `field name ".hidden"`},
		{doc(entry("ids", "fields/ids")), `field name "ids"`},
		{doc(entry("x.offsets", "fields/x.offsets")), `field name "x.offsets"`},
		{doc(`{"name":"a","kind":"fixed","record_size":4,"dtype":"<i4","dtype":"<f4","dir":"fields/a"}`), "dtype"},
		{doc(entry("a", "fields/a")) + `{}`, "trailing"},
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, FieldsManifestName), []byte(c.body), 0o644))
		_, err := ReadFieldsManifest(dir)
		require.ErrorIs(t, err, ErrFormat, c.body)
		require.ErrorContains(t, err, c.want, c.body)
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, FieldsManifestName), []byte(doc(entry("img.bytes", "fields/img.bytes"))), 0o644))
	_, err := ReadFieldsManifest(dir)
	require.NoError(t, err)
}
