package layout

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseManifestStrict: a manifest that says a thing twice (a key repeated, at the top or
// in a block, or a second object after the first) is refused, naming the key and where it is,
// instead of encoding/json taking the last value (another record count, another CRC).
func TestParseManifestStrict(t *testing.T) {
	good := `{"format":"blockfs-dataset","version":1,"kind":"fixed","record_size":4,"records":2,"bytes":8,"ids":false,` +
		`"preshuffle":{"shuffled":false,"seed":0},"blocks":[{"file":"blocks/000000.bin","records":2,"bytes":8,"crc32c":1}]}`
	_, err := ParseManifest("m.json", []byte(good))
	require.NoError(t, err)
	for _, c := range []struct{ in, want string }{
		{strings.Replace(good, `"records":2,`, `"records":2,"records":2,`, 1), `key "records" twice in the top-level object`},
		{strings.Replace(good, `"crc32c":1`, `"crc32c":1,"crc32c":7`, 1), `key "crc32c" twice in blocks[0]`},
		{strings.Replace(good, `"record_size":4`, `"record_size":4,"Record_Size":8`, 1), `key "Record_Size" twice in the top-level object`},
		{strings.Replace(good, `"seed":0`, `"seed":0,"seed":0`, 1), `key "seed" twice in preshuffle`},
		{good + "]", "trailing data after the JSON value (at byte " + strconv.Itoa(len(good)) + ")"},
		{good + ` {"blocks":[]}`, "trailing data after the JSON value"},
	} {
		_, err := ParseManifest("m.json", []byte(c.in))
		require.Error(t, err, c.in)
		assert.True(t, errors.Is(err, ErrFormat), c.in)
		assert.Contains(t, err.Error(), "m.json: manifest has "+c.want, c.in)
		assert.Contains(t, err.Error(), "; pack the dataset again", c.in)
	}
}
