package test

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStoresNodeAware: a node-aware mount of a dataset in each new store (gs:// in
// fake-gcs-server, az:// in Azurite, https:// on a web server of the test's own), two nodes
// each with a disk cache: each node's epochs are exactly the raw records its ids name, the two
// nodes' epoch 0 is every record once, the store sends a node at most 1.1x its share for
// epoch 0, and for epoch 1, read by a new mount over the same disk cache (nothing in its
// memory), at most 0.05x: each byte fetched about once, as s3:// does (TestNodesCluster).
func TestStoresNodeAware(t *testing.T) {
	requireFUSE(t)
	const rec, n = 4096, 4096 // 16 MiB of 4 KiB records, in 64 blocks of 256 KiB
	dir := t.TempDir()
	raw := filepath.Join(dir, "records.bin")
	r := rand.New(rand.NewPCG(54, 2))
	data := make([]byte, rec*n)
	for i := 0; i < len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	require.NoError(t, os.WriteFile(raw, data, 0o644))
	flags := []string{"pack", "--quiet", "--format", "raw", "--record-size", "4KiB", "--block-size", "256KiB", "--seed", "3"}
	www := filepath.Join(dir, "www")
	require.NoError(t, os.MkdirAll(www, 0o755))
	mustRun(t, append(flags, raw, filepath.Join(www, "set"))...)

	stores := map[string]func(t *testing.T) (string, []string){
		"gs": func(t *testing.T) (string, []string) {
			srv := startGCS(t, "data")
			ep := "--endpoint=" + srv.endpoint()
			mustRun(t, append(append([]string{}, flags[0], ep), append(flags[1:], raw, "gs://data/set")...)...)
			return "gs://data/set", []string{ep}
		},
		"az": func(t *testing.T) (string, []string) {
			srv := startAzurite(t, "data")
			ep := "--endpoint=" + srv.endpoint()
			mustRun(t, append(append([]string{}, flags[0], ep), append(flags[1:], raw, "az://devstoreaccount1/data/set")...)...)
			return "az://devstoreaccount1/data/set", []string{ep}
		},
		"https": func(t *testing.T) (string, []string) {
			return startWeb(t, &webRoot{root: www}) + "/set", nil
		},
	}
	for _, name := range []string{"gs", "az", "https"} {
		t.Run(name, func(t *testing.T) {
			url, extra := stores[name](t)
			var all []uint64
			for node := range 2 {
				// Epoch 0 by one mount, epoch 1 by the next over the same disk cache: the second
				// mount's memory holds nothing, so what it does not fetch, its disk cache had.
				var share int64
				for e, epoch := range []string{"epoch-0000", "epoch-0001"} {
					m := mount(t, url, append(extra, "--nodes", "2", "--node", string(rune('0'+node)), "--parts", "8", "--seed", "5",
						"--cache-size", "96MiB", "--disk-cache", filepath.Join(dir, name+"-dc"+string(rune('0'+node))))...)
					ids := readIDs(t, m.path(epoch+".ids"))
					got, err := os.ReadFile(m.path(epoch))
					require.NoError(t, err)
					require.Equal(t, len(ids)*rec, len(got))
					for k, id := range ids {
						require.True(t, slices.Equal(data[id*rec:(id+1)*rec], got[k*rec:(k+1)*rec]), "%s node %d %s: record %d (id %d)", name, node, epoch, k, id)
					}
					if e == 0 {
						all = append(all, ids...)
						share = int64(len(ids)) * (rec + 8) // its records and their ids files
					}
					ratio := diskStats(t, m)["fetched_bytes"] / float64(share)
					t.Logf("%s node %d, %s (mount %d): the store sent %.3f x the node's share", name, node, epoch, e, ratio)
					limit := 1.1
					if e > 0 {
						limit = 0.05
					}
					require.LessOrEqual(t, ratio, limit, "%s node %d, %s", name, node, epoch)
					m.stop()
				}
			}
			slices.Sort(all)
			require.Len(t, all, n, "%s: the nodes' epoch 0 together", name)
			for i, id := range all {
				require.Equal(t, uint64(i), id, "%s: every record once", name)
			}
		})
	}
}
