package layout

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/blockfs/blockfs/internal/userfile"
)

// What a reader of a dataset with fields checks beyond the JSON of blockfs-fields.json: that
// each field's name is one pack writes (so fields/NAME stays a directory of the dataset), that
// its entry says what the field's own blockfs.json says (the kind, record size, dtype and
// shape every reader decodes its values with), and that its directory is inside the dataset.
// mount, info, order and verify call them on every field they open.

// FieldNameForm is the form of the names pack gives fields (FORMAT.md): 1 to 64 letters,
// digits, '_', '-' and '.', not starting with '.' or '-'.
var FieldNameForm = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// IsSidecarName reports whether name is one of the mount's sidecars' (ids, offsets, source, or
// ending in .offsets), which no field may have.
func IsSidecarName(name string) bool {
	return slices.Contains([]string{"ids", "offsets", "source"}, name) || strings.HasSuffix(name, ".offsets")
}

// checkFieldName refuses a field name that pack does not write: one that is not a single
// path element ("../x", "a/b"), or a sidecar's.
func checkFieldName(name string) error {
	if !FieldNameForm.MatchString(name) || IsSidecarName(name) {
		return fmt.Errorf("field name %q is not one pack writes (1 to 64 letters, digits, '_', '-' and '.', not starting with '.' or '-', not a sidecar's): the manifest was edited; pack the dataset again", name)
	}
	return nil
}

// FieldPath returns the directory of field fl of the dataset with fields in directory dir,
// refusing one that resolves outside it (a symlinked fields/ or fields/NAME), as a plain
// dataset refuses a block file that does (ErrUnsafePath). A missing directory is returned as
// is: opening it says so.
func FieldPath(dir string, fl Field) (string, error) {
	p := filepath.Join(dir, filepath.FromSlash(fl.Dir))
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if os.IsNotExist(err) {
			return p, nil
		}
		return "", wrapf(ErrIO, err, p, -1, "%v", err)
	}
	top, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", wrapf(ErrIO, err, dir, -1, "%v", err)
	}
	if !userfile.Within(top, real) {
		return "", errorf(ErrUnsafePath, p, -1, "field %q resolves to %s, outside the dataset directory", fl.Name, real)
	}
	return p, nil
}

// CheckField checks that field i's dataset ds is what the manifest says of it: its records,
// kind, record size, dtype and shape (a reader decodes its values by the manifest's), in
// input order (no ids stored), fixed-size if it has blocks of its own, and, for a field cut at
// the samples, cut at the same records as anchor (the dataset of the manifest's Anchor field;
// nil: not checked). Errors are ErrCorrupt, name ds's directory and the field, and say to pack
// the dataset again.
func (m *FieldsManifest) CheckField(i int, ds, anchor *Dataset) error {
	fl := m.Fields[i]
	bad := func(format string, args ...any) error {
		return errorf(ErrCorrupt, ds.Dir, -1, "field %q: "+format+"; pack the dataset again", append([]any{fl.Name}, args...)...)
	}
	own := ds.Manifest
	top := element(fl.Kind, fl.RecordSize, fl.DType, fl.Shape)
	if mine := element(own.Kind, own.RecordSize, own.DType, own.Shape); top != mine {
		return bad("%s says %s, its own %s says %s (a manifest edited by hand?)", FieldsManifestName, top, ManifestName, mine)
	}
	if ds.Records() != m.Records {
		return bad("has %d records; %s says %d", ds.Records(), FieldsManifestName, m.Records)
	}
	if ds.HasIDs() || own.PreShuffle.Shuffled {
		return bad("its records are pre-shuffled, but a field's are in input order")
	}
	if fl.Own() {
		if ds.Kind() != Fixed {
			return bad("has blocks of its own but is not fixed-size records")
		}
		return nil
	}
	if anchor != nil && anchor != ds && !slices.Equal(ds.BlockCounts(), anchor.BlockCounts()) {
		return bad("its blocks hold other records than field %q's: the fields must be cut at the same samples", m.Fields[m.Anchor()].Name)
	}
	return nil
}

// element describes how a field's values are decoded: its kind, record size, dtype and shape.
func element(kind Kind, size int64, dtype string, shape []int64) string {
	var b strings.Builder
	if kind == Fixed {
		fmt.Fprintf(&b, "%d-byte fixed records", size)
	} else {
		fmt.Fprintf(&b, "%s records", kind)
	}
	if dtype == "" {
		b.WriteString(" of bytes (no dtype)")
	} else {
		fmt.Fprintf(&b, " of dtype %s", dtype)
	}
	if len(shape) > 0 || dtype != "" {
		fmt.Fprintf(&b, " shape %v", shape)
	}
	return b.String()
}
