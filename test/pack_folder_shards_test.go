package test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPackFolderOfShards: blockfs pack over a folder of WebDataset shards written by Python's
// tarfile reads them as shards, as the quoted glob does (saying so), and the mount serves every
// field of every sample exactly.
func TestPackFolderOfShards(t *testing.T) {
	requireFUSE(t)
	shards := t.TempDir()
	_, samples := writeShards(t, shards, 300, 100)
	ds := filepath.Join(t.TempDir(), "ds")
	out, errs, code := run(t, "pack", "--quiet", shards, ds)
	require.Equal(t, 0, code, "%s", errs)
	assert.Contains(t, out, "packed 300 samples with fields jpg (variable), cls (variable), json (variable) from 3 files")
	assert.Contains(t, errs, "note: "+shards+" is a folder of 3 webdataset shards: packed their samples with fields (--format files packs each file as one record instead)")
	m := mount(t, ds)
	ids := readIDs(t, m.path("epoch-0000.ids"))
	require.Len(t, ids, len(samples))
	for _, field := range []string{"jpg", "cls", "json"} {
		vals := fieldValues(t, m.path("epoch-0000."+field), 0)
		require.Len(t, vals, len(samples), field)
		for k, id := range ids {
			require.Equal(t, samples[id][field], vals[k], "sample %d field %s", id, field)
		}
	}
}
