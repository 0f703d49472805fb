package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoresShardsInPlace: WebDataset shards in gs:// (fake-gcs-server) and az:// (Azurite,
// uploaded by Microsoft's SDK) served in place, as from s3:// (TestS3ShardsInPlace):
// indexed by blockfs index from the store's listing, the index mounted, and the prefix
// mounted with an automatic index; every sample of epochs 0 and 1 is the shards' bytes.
func TestStoresShardsInPlace(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	glob, samples := writeShards(t, dir, 600, 200)
	paths, err := filepath.Glob(glob)
	require.NoError(t, err)
	wds := func(id uint64, f string) []byte { return samples[id][f] }
	fields := []string{"jpg", "cls", "json"}
	for _, c := range []struct {
		name string
		up   func(t *testing.T) (string, string) // uploads the shards: the prefix's URL, --endpoint
	}{
		{"gs", func(t *testing.T) (string, string) {
			srv := startGCS(t, "data")
			for _, p := range paths {
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				srv.put("data", "wds/"+filepath.Base(p), b)
			}
			return "gs://data/wds", "--endpoint=" + srv.endpoint()
		}},
		{"az", func(t *testing.T) (string, string) {
			srv := startAzurite(t, "data")
			for _, p := range paths {
				srv.sdk("put", "data", "wds/"+filepath.Base(p), p)
			}
			return "az://devstoreaccount1/data/wds", "--endpoint=" + srv.endpoint()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, ep := c.up(t)
			idx := filepath.Join(t.TempDir(), "idx")
			out := mustRun(t, "index", ep, "--block-size", "64KiB", url+"/", idx)
			assert.Contains(t, out, fmt.Sprintf("600 samples of %d webdataset shards", len(paths)))
			m := mount(t, idx, ep, "--seed", "2", "--cache-size", "64MiB")
			checkSampleEpochs(t, m, []int{0, 1}, fields, wds, 600)
			m.stop()
			mi := mount(t, url, ep, "--index", filepath.Join(t.TempDir(), "ix"), "--cache-size", "64MiB")
			checkSampleEpochs(t, mi, []int{0, 1}, fields, wds, 600)
			mi.stop()
		})
	}
}

// TestStoresPackParts: a pack in parts into gs:// and az:// (three parts, one of them run
// twice), merged in the store (refused while another merge's lock is there: checkMergeLock),
// verifies and serves every record once, as into s3:// (TestPackPartsS3).
func TestStoresPackParts(t *testing.T) {
	requireFUSE(t)
	dir, _, records := partsInputs(t, 500, 700, 300, 9)
	glob := filepath.Join(dir, "in-*.raw")
	for _, c := range []struct {
		name string
		at   func(t *testing.T) (url, ep string, plant func(string, []byte), list func(string) []string)
	}{
		{"gs", func(t *testing.T) (string, string, func(string, []byte), func(string) []string) {
			s := startGCS(t, "data")
			return "gs://data/in-parts", "--endpoint=" + s.endpoint(),
				func(key string, body []byte) { s.put("data", key, body) },
				func(prefix string) []string { return s.objects("data", prefix) }
		}},
		{"az", func(t *testing.T) (string, string, func(string, []byte), func(string) []string) {
			s := startAzurite(t, "data")
			return "az://devstoreaccount1/data/in-parts", "--endpoint=" + s.endpoint(),
				func(key string, body []byte) {
					f := filepath.Join(t.TempDir(), "lock")
					require.NoError(t, os.WriteFile(f, body, 0o644))
					s.sdk("put", "data", key, f)
				},
				func(prefix string) []string { return strings.Fields(s.sdk("list", "data", prefix)) }
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, ep, plant, list := c.at(t)
			flags := []string{ep, "--format", "raw", "--record-size", fmt.Sprint(partsRecord), "--block-size", "16KiB", "--seed", "8"}
			packPartsCLI(t, []string{glob}, url, 3, flags...)
			mustRun(t, append(append([]string{"pack", "--part", "1/3", "--quiet"}, flags...), glob, url)...) // a part run again
			checkMergeLock(t, ep, url, plant, list)
			require.Contains(t, mustRun(t, "verify", ep, url), url+": ok")
			m := mount(t, url, ep, "--seed", "4")
			checkEpoch(t, m, "epoch-0000", records)
			checkEpoch(t, m, "epoch-0001", records)
		})
	}
}
