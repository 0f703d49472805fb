package test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestS3Fields packs datasets with fields to MinIO (WebDataset shards: variable fields; a
// Parquet table: a field with blocks of its own beside variable ones), each field's blocks
// uploaded as they are written and blockfs-fields.json last, and mounts them from there (with
// and without a disk cache): every field of every sample, in every epoch's order, is what a
// mount of the same pack on local disk serves.
func TestS3Fields(t *testing.T) {
	requireFUSE(t)
	srv := startMinio(t)
	srv.bucket("data")
	ep := "--endpoint=" + srv.endpoint()
	dir := t.TempDir()
	glob, _ := writeShards(t, dir, 600, 200)
	for _, c := range []struct {
		name, src string
		fields    []string
		flags     []string
	}{
		{"webdataset", glob, []string{"jpg", "cls", "json"}, []string{"--block-size", "64KiB"}},
		{"parquet", "testdata/parquet/types.parquet", []string{"row", "img.bytes", "name"}, []string{"--columns", "row,img.bytes,name", "--block-size", "4KiB"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := "s3://data/fields/" + c.name
			local := filepath.Join(dir, c.name)
			mustRun(t, append(append([]string{"pack", "--quiet"}, c.flags...), c.src, local)...)
			scratch := t.TempDir()
			out, err := packCmd(scratch, append(append([]string{"pack", "--quiet", ep}, c.flags...), c.src, url)...).CombinedOutput()
			require.NoError(t, err, "%s", out)
			keys := listKeys(t, srv, "fields/"+c.name+"/")
			require.Contains(t, keys, "fields/"+c.name+"/blockfs-fields.json")
			for _, f := range c.fields {
				require.Contains(t, keys, "fields/"+c.name+"/fields/"+f+"/blockfs.json")
			}
			require.Equal(t, mustRun(t, "verify", local), strings.ReplaceAll(mustRun(t, "verify", ep, url), url, local))
			require.Equal(t, mustRun(t, "info", local), strings.ReplaceAll(mustRun(t, "info", ep, url), url, local))

			ml := mount(t, local, "--seed", "4")
			for _, extra := range [][]string{nil, {"--disk-cache", filepath.Join(t.TempDir(), "dc")}} {
				mr := mount(t, url, append([]string{ep, "--seed", "4"}, extra...)...)
				for _, e := range []int{0, 3} {
					for _, suffix := range append([]string{"ids"}, c.fields...) {
						name := fmt.Sprintf("epoch-%04d.%s", e, suffix)
						want := readWhole(t, ml.path(name), 1<<20)
						require.True(t, bytes.Equal(want, readWhole(t, mr.path(name), 1<<20)), "%s differs from the local mount's (%v)", name, extra)
						if suffix != "ids" && suffix != "row" {
							offs := name + ".offsets"
							require.True(t, bytes.Equal(readWhole(t, ml.path(offs), 1<<20), readWhole(t, mr.path(offs), 1<<20)), offs)
						}
					}
				}
				mr.stop()
			}
			// A second pack to the same prefix needs --force, and a plain dataset does not
			// replace a dataset with fields without it either.
			out, err = packCmd(scratch, append(append([]string{"pack", "--quiet", ep}, c.flags...), c.src, url)...).CombinedOutput()
			require.Error(t, err)
			require.Contains(t, string(out), "--force")
		})
	}
}
