package test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
)

// partsRecord is the size of the records of the pack-in-parts tests.
const partsRecord = 512

// partsInputs writes raw inputs of counts[i] records each, numbered on from one input to the
// next (record k is dstest.Record(k)), and returns their paths and the records in order.
func partsInputs(t *testing.T, counts ...int) (string, []string, [][]byte) {
	dir := t.TempDir()
	var paths []string
	var records [][]byte
	for i, n := range counts {
		var b []byte
		for j := 0; j < n; j++ {
			rec := dstest.Record(uint64(len(records)), partsRecord)
			records = append(records, rec)
			b = append(b, rec...)
		}
		p := filepath.Join(dir, fmt.Sprintf("in-%02d.raw", i))
		require.NoError(t, os.WriteFile(p, b, 0o644))
		paths = append(paths, p)
	}
	return dir, paths, records
}

// packPartsCLI runs blockfs pack --part I/N for each I, with inputs (as given on the command
// line) and the flags.
func packPartsCLI(t *testing.T, inputs []string, out string, parts int, flags ...string) {
	for i := 0; i < parts; i++ {
		args := append([]string{"pack", "--part", fmt.Sprintf("%d/%d", i, parts), "--quiet"}, flags...)
		mustRun(t, append(append(args, inputs...), out)...)
	}
}

// checkEpoch requires that epoch file data of the mount holds every record once, each the
// record its .ids file names: record id k is input record k, as one pack numbers them.
func checkEpoch(t *testing.T, m *mounted, epoch string, records [][]byte) {
	data, err := os.ReadFile(m.path(epoch))
	require.NoError(t, err)
	ids, err := os.ReadFile(m.path(epoch + ".ids"))
	require.NoError(t, err)
	require.Len(t, data, len(records)*partsRecord)
	require.Len(t, ids, len(records)*8)
	seen := make([]bool, len(records))
	for i := range records {
		id := binary.LittleEndian.Uint64(ids[8*i:])
		require.Less(t, id, uint64(len(records)))
		require.False(t, seen[id], "%s: record %d twice", epoch, id)
		seen[id] = true
		require.Equal(t, records[id], data[i*partsRecord:(i+1)*partsRecord], "%s position %d: id %d", epoch, i, id)
	}
}

func TestPackParts(t *testing.T) {
	dir, paths, records := partsInputs(t, 700, 13, 1200, 1, 600, 486, 300)
	list := filepath.Join(dir, "inputs.txt")
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(paths, "\n")+"\n"), 0o644))
	flags := []string{"--format", "raw", "--record-size", fmt.Sprint(partsRecord), "--block-size", "16KiB", "--seed", "3"}

	t.Run("shuffled", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "ds")
		// Parts 0 and 1 from a glob, 2 and 3 from a list: the same inputs, so they merge.
		for i, in := range []string{filepath.Join(dir, "in-*.raw"), filepath.Join(dir, "in-*.raw"), "@" + list, "@" + list} {
			mustRun(t, append(append([]string{"pack", "--part", fmt.Sprintf("%d/4", i), "--quiet"}, flags...), in, out)...)
		}
		_, err := os.Stat(filepath.Join(out, "blockfs.json"))
		require.ErrorIs(t, err, os.ErrNotExist, "the dataset appears only at the merge")
		merged := mustRun(t, "pack", "--merge", out)
		require.Contains(t, merged, "merged 4 parts")
		require.Contains(t, mustRun(t, "verify", out), "ok")
		require.Contains(t, mustRun(t, "info", out), fmt.Sprintf("records:      %d", len(records)))
		ids := mustRun(t, "order", out, "--seed", "11", "--epoch", "1", "--ids")
		require.Len(t, strings.Fields(ids), len(records))
		m := mount(t, out, "--seed", "11")
		var info struct {
			Order struct {
				Mix     int  `json:"mix"`
				InOrder bool `json:"in_order"`
			} `json:"order"`
		}
		raw, err := os.ReadFile(m.path(".blockfs/info.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &info))
		require.True(t, info.Order.InOrder, "each part is pre-shuffled, the whole is not")
		require.Greater(t, info.Order.Mix, 1, "the automatic --mix mixes blocks across the parts")
		checkEpoch(t, m, "epoch-0000", records)
		checkEpoch(t, m, "epoch-0001", records)
		require.Equal(t, ids, idsText(t, m.path("epoch-0001.ids")), "order --ids and the mount agree")
	})

	t.Run("no-shuffle", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "ds")
		packPartsCLI(t, []string{filepath.Join(dir, "in-*.raw")}, out, 3, append(flags, "--no-shuffle")...)
		mustRun(t, "pack", "--merge", out)
		require.Contains(t, mustRun(t, "verify", out), "ok")
		m := mount(t, out, "--seed", "2")
		checkEpoch(t, m, "epoch-0000", records)
	})

	t.Run("empty inputs", func(t *testing.T) {
		// Empty files among the inputs add no records; parts of nothing else are empty parts
		// (they failed their part, and the merge with it).
		_, epaths, erecords := partsInputs(t, 40, 0, 50, 0)
		out := filepath.Join(t.TempDir(), "ds")
		packPartsCLI(t, epaths, out, 4, flags...)
		require.Contains(t, mustRun(t, "pack", "--merge", out), "merged 4 parts (2 empty)")
		m := mount(t, out, "--seed", "2")
		checkEpoch(t, m, "epoch-0000", erecords)
	})

	t.Run("refusals", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "ds")
		glob := []string{filepath.Join(dir, "in-*.raw")}
		refuse := func(want string) {
			t.Helper()
			_, errs, code := run(t, "pack", "--merge", out)
			require.Equal(t, 1, code, errs)
			require.Equal(t, 1, strings.Count(errs, "\n"), "one line: %s", errs)
			require.Contains(t, errs, want)
		}
		packPartsCLI(t, glob, out, 4, flags...)
		require.NoError(t, os.Remove(filepath.Join(out, "parts", "part-3-of-4.json")))
		refuse("part 3 of 4 is missing")
		mustRun(t, append(append([]string{"pack", "--part", "3/4", "--quiet"}, flags...), glob[0], out)...)
		mustRun(t, append(append([]string{"pack", "--part", "1/3", "--quiet"}, flags...), glob[0], out)...)
		refuse("part 1 is there twice: part-1-of-3 and part-1-of-4")
		require.NoError(t, os.RemoveAll(filepath.Join(out, "parts", "part-1-of-3")))
		require.NoError(t, os.Remove(filepath.Join(out, "parts", "part-1-of-3.json")))
		foreign := append(append([]string{"pack", "--part", "2/4", "--quiet"}, flags...), "--seed", "4")
		mustRun(t, append(foreign, glob[0], out)...)
		refuse("part-2-of-4 is foreign")
		mustRun(t, append(append([]string{"pack", "--part", "2/4", "--quiet"}, flags...), paths[0], paths[1], paths[2], out)...)
		refuse("part-2-of-4 is foreign: it packed other inputs")
		// The failed part is packed again alone; then the merge succeeds.
		mustRun(t, append(append([]string{"pack", "--part", "2/4", "--quiet"}, flags...), glob[0], out)...)
		mustRun(t, "pack", "--merge", out)
		require.Contains(t, mustRun(t, "verify", out), "ok")
		_, errs, code := run(t, "pack", "--merge", out)
		require.Equal(t, 1, code)
		require.Contains(t, errs, "--force")
	})
}

// TestPackPartsS3 packs 3 parts into MinIO (a part's blocks uploaded under PREFIX/parts/),
// merges them there, and reads the merged dataset as one pack's: verify, the mount's epochs.
func TestPackPartsS3(t *testing.T) {
	srv := startMinio(t)
	srv.bucket("data")
	dir, _, records := partsInputs(t, 500, 700, 300, 9)
	ep := "--endpoint=" + srv.endpoint()
	url := "s3://data/in-parts"
	flags := []string{ep, "--format", "raw", "--record-size", fmt.Sprint(partsRecord), "--block-size", "16KiB", "--seed", "8"}
	glob := filepath.Join(dir, "in-*.raw")
	packPartsCLI(t, []string{glob}, url, 3, flags...)
	_, errs, code := run(t, "verify", ep, url)
	require.NotZero(t, code, "no dataset before the merge: %s", errs)

	mustRun(t, append(append([]string{"pack", "--part", "1/3", "--quiet"}, flags...), glob, url)...) // a part run again
	checkMergeLock(t, ep, url, func(key string, body []byte) {
		_, err := srv.cl.PutObject(context.Background(), "data", key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
		require.NoError(t, err)
	}, func(prefix string) (keys []string) {
		for o := range srv.cl.ListObjects(context.Background(), "data", minioListAll(prefix)) {
			keys = append(keys, o.Key)
		}
		return keys
	})
	require.Contains(t, mustRun(t, "verify", ep, url), url+": ok")
	m := mount(t, url, ep, "--seed", "4")
	checkEpoch(t, m, "epoch-0000", records)
	checkEpoch(t, m, "epoch-0001", records)

	other := "s3://data/missing"
	packPartsCLI(t, []string{glob}, other, 2, flags...)
	mustRun(t, append(append([]string{"pack", "--part", "1/3", "--quiet"}, flags...), glob, other)...)
	_, errs, code = run(t, "pack", "--merge", ep, other)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "part 1 is there twice")
}

// fieldsByID reads every field of epoch file base of a mounted dataset with fields and
// returns each sample's values by its id (the epoch's .ids).
func fieldsByID(t *testing.T, m *mounted, epoch string, fields []string) map[uint64]map[string][]byte {
	t.Helper()
	ids := readIDs(t, m.path(epoch+".ids"))
	out := map[uint64]map[string][]byte{}
	for _, id := range ids {
		require.NotContains(t, out, id, "%s: sample %d twice", epoch, id)
		out[id] = map[string][]byte{}
	}
	for _, f := range fields {
		vals := fieldValues(t, m.path(epoch+"."+f), 0)
		require.Len(t, vals, len(ids), "%s.%s", epoch, f)
		for p, id := range ids {
			out[id][f] = vals[p]
		}
	}
	return out
}

// TestPackPartsFields packs WebDataset shards written by Python's tarfile (samples of jpg, cls
// and json) in 4 parts, merges them, and serves them as one pack of the same shards does:
// the same fields with their .offsets, and every value of an epoch the input sample's that
// its id names.
func TestPackPartsFields(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	glob, samples := writeShards(t, dir, 1200, 400)
	out := filepath.Join(t.TempDir(), "ds")
	packPartsCLI(t, []string{glob}, out, 4, "--block-size", "64KiB")
	_, err := os.Stat(filepath.Join(out, "blockfs-fields.json"))
	require.ErrorIs(t, err, os.ErrNotExist, "the dataset appears only at the merge")
	_, err = os.Stat(filepath.Join(out, "fields", "cls", "parts", "part-3-of-4", "blockfs.json"))
	require.NoError(t, err, "part 3's cls in cls's folder")
	require.Contains(t, mustRun(t, "pack", "--merge", out), "merged 4 parts")
	require.Contains(t, mustRun(t, "verify", out), "ok")

	whole := filepath.Join(t.TempDir(), "whole")
	mustRun(t, "pack", "--quiet", "--block-size", "64KiB", glob, whole)
	fields := []string{"jpg", "cls", "json"}
	var byID [2]map[uint64]map[string][]byte
	var names [2][]string
	for k, ds := range []string{out, whole} {
		m := mount(t, ds, "--seed", "5", "--cache-size", "256MiB")
		entries, err := os.ReadDir(m.dir)
		require.NoError(t, err)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "epoch-0000") {
				names[k] = append(names[k], e.Name())
			}
		}
		byID[k] = fieldsByID(t, m, "epoch-0000", fields)
		require.Len(t, byID[k], len(samples))
		for id, vals := range byID[k] {
			for _, f := range fields {
				require.Equal(t, samples[id][f], vals[f], "%s: sample %d field %s", ds, id, f)
			}
		}
	}
	assert.Equal(t, names[1], names[0], "the same fields and .offsets as one pack")
	assert.Equal(t, []string{"epoch-0000.cls", "epoch-0000.cls.offsets", "epoch-0000.ids", "epoch-0000.jpg", "epoch-0000.jpg.offsets", "epoch-0000.json", "epoch-0000.json.offsets"}, names[0])
	assert.Equal(t, byID[1], byID[0], "the same values for the same ids as one pack")
}

// TestPackPartsFieldsS3 packs WebDataset shards of several fields in 3 parts into MinIO (each
// field's blocks under PREFIX/fields/NAME/parts/), merges them there, and mounts the merged
// dataset: every value of an epoch is the input sample's its id names.
func TestPackPartsFieldsS3(t *testing.T) {
	srv := startMinio(t)
	srv.bucket("data")
	dir := t.TempDir()
	glob, samples := writeShards(t, dir, 600, 200)
	ep := "--endpoint=" + srv.endpoint()
	url := "s3://data/fields-in-parts"
	packPartsCLI(t, []string{glob}, url, 3, ep, "--block-size", "64KiB")
	mustRun(t, "pack", "--part", "1/3", "--quiet", ep, "--block-size", "64KiB", glob, url) // a part run again
	require.Contains(t, mustRun(t, "pack", "--merge", ep, url), "merged 3 parts")
	require.Contains(t, mustRun(t, "verify", ep, url), "ok")
	m := mount(t, url, ep, "--seed", "4", "--cache-size", "256MiB")
	fields := []string{"jpg", "cls", "json"}
	byID := fieldsByID(t, m, "epoch-0001", fields)
	require.Len(t, byID, len(samples))
	for id, vals := range byID {
		for _, f := range fields {
			require.Equal(t, samples[id][f], vals[f], "sample %d field %s", id, f)
		}
	}
}
