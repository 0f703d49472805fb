package layout

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseManifestKeys: keys are compared as encoding/json fills the manifest. Its fields
// match keys without regard to case, folded as encoding/json folds them, so "\u212aind" (with
// a Kelvin sign) is "kind" twice, not a second kind taken silently. "extra" is a map, where
// encoding/json keeps keys that differ in case apart, so {"Label": 1, "label": 2} there opens;
// a key repeated exactly is still refused.
func TestParseManifestKeys(t *testing.T) {
	good := `{"format":"blockfs-dataset","version":1,"kind":"fixed","record_size":4,"records":2,"bytes":8,"ids":false,` +
		`"preshuffle":{"shuffled":false,"seed":0},"blocks":[{"file":"blocks/000000.bin","records":2,"bytes":8,"crc32c":1}]}`
	withExtra := strings.Replace(good, `"ids":false,`, `"ids":false,"extra":{"Label":1,"label":2,"nested":{"A":[{"b":1,"B":2}],"a":3}},`, 1)
	m, err := ParseManifest("m.json", []byte(withExtra))
	require.NoError(t, err)
	assert.Len(t, m.Extra, 3)
	for _, c := range []struct{ in, want string }{
		{strings.Replace(good, `"kind":"fixed"`, `"kind":"fixed","\u212aind":"variable"`, 1), "key \"\u212aind\" twice in the top-level object"},
		{strings.Replace(good, `"records":2,"bytes"`, `"records":2,"record\u017f":3,"bytes"`, 1), "key \"record\u017f\" twice in the top-level object"},
		{strings.Replace(good, `"crc32c":1`, `"crc32c":1,"CRC32\u0043":7`, 1), `key "CRC32C" twice in blocks[0]`},
		{strings.Replace(good, `"ids":false,`, `"ids":false,"extra":{"Label":1,"Label":2},`, 1), `key "Label" twice in extra`},
		{strings.Replace(good, `"ids":false,`, `"ids":false,"extra":{"x":{"a":1,"a":2}},`, 1), `key "a" twice in extra.x`},
		{strings.Replace(good, `"ids":false,`, `"ids":false,"extra":{},"Extra":{},`, 1), `key "Extra" twice in the top-level object`},
	} {
		_, err := ParseManifest("m.json", []byte(c.in))
		require.Error(t, err, c.in)
		assert.True(t, errors.Is(err, ErrFormat), c.in)
		assert.Contains(t, err.Error(), "m.json: manifest has "+c.want, c.in)
	}
}
