package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/dstest"
)

// TestIndexBlockRecords: an index cuts a block at 2^20 samples whatever their bytes, and a
// mount refuses an index whose block holds more. A TFRecord file of empty records (16 bytes
// of framing each) indexed as one block of 2^26 samples for 1 GiB, whose offsets the mount
// then read whole into memory; an index block of 2^36 samples crashed the daemon.
func TestIndexBlockRecords(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	const n = 1<<20 + 5
	rec := dstest.TFRecord([][]byte{{}}) // an empty record: 16 bytes of framing
	file := filepath.Join(dir, "empty.tfrecord")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat(string(rec), n)), 0o644))

	idx := filepath.Join(dir, "idx")
	mustRun(t, "index", file, idx)
	raw, err := os.ReadFile(filepath.Join(idx, "blockfs-index.json"))
	require.NoError(t, err)
	var ix struct {
		Records uint64 `json:"records"`
		Blocks  []struct {
			Records uint64 `json:"records"`
		} `json:"blocks"`
	}
	require.NoError(t, json.Unmarshal(raw, &ix))
	require.EqualValues(t, n, ix.Records)
	require.Len(t, ix.Blocks, 2, "cut at 2^20 samples")
	assert.EqualValues(t, 1<<20, ix.Blocks[0].Records)

	m := mount(t, idx, "--cache-size", "64MiB")
	ids := readWhole(t, m.path("epoch-0000.ids"), 16<<20)
	assert.Len(t, ids, 8*n)
	m.stop()

	// The same index with its first block claiming 2^36 samples (and the total to match):
	// refused in one line.
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	blocks := doc["blocks"].([]any)
	blocks[0].(map[string]any)["records"] = float64(1 << 36)
	doc["records"] = float64(1<<36 + 5)
	forged, err := json.MarshalIndent(doc, "", " ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(idx, "blockfs-index.json"), forged, 0o644))
	_, errs, code, _ := runWithin(t, 30*time.Second, "mount", idx, t.TempDir())
	assert.Equal(t, 1, code, errs)
	oneLine(t, errs, "block 0 holds 68719476736 samples, more than the 1048576 a block may")
}

// TestShardMemberNamesAndLinks: pack and index read a tar's members alike. A member named
// with 1 MB (a PAX header allows it) made a 1 MB error line; now one short line. A symbolic
// link named like a sample's value (s2.cls -> /etc/passwd) is refused by both, naming it,
// even with --fill-missing and wherever it comes among the tar's members: index served an
// empty value where pack refused.
func TestShardMemberNamesAndLinks(t *testing.T) {
	dir := t.TempDir()
	script := `
import io, sys, tarfile
def member(t, name, data):
    i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
with tarfile.open(sys.argv[1] + "/long.tar", "w", format=tarfile.PAX_FORMAT) as t:
    member(t, "a/" + "x" * 1000000 + ".jpg", b"abc")
    member(t, "k1.jpg", b"x"); member(t, "k1.cls", b"1")
for order in ("after", "before", "first"):
    bad = 0 if order == "first" else 2  # "first": no sample has had a cls file yet
    with tarfile.open(sys.argv[1] + "/link-%s.tar" % order, "w") as t:
        for k in range(4):
            link = tarfile.TarInfo("s%d.cls" % k); link.type = tarfile.SYMTYPE; link.linkname = "/etc/passwd"
            if k == bad and order == "before":
                t.addfile(link)
            member(t, "s%d.jpg" % k, b"img%d" % k)
            if k == bad and order != "before":
                t.addfile(link)
            elif k != bad:
                member(t, "s%d.cls" % k, b"%d" % k)
`
	out, err := exec.Command("/usr/bin/python3", "-c", script, dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, cmd := range [][]string{{"pack"}, {"index"}} {
		_, errs, code, _ := runWithin(t, 30*time.Second, append(cmd, filepath.Join(dir, "long.tar"), filepath.Join(dir, cmd[0]+"-long"))...)
		assert.Equal(t, 1, code, errs)
		oneLine(t, errs, "a member's name is 1000006 bytes")
		assert.Less(t, len(errs), 400, "%s: a short line", cmd[0])
		for _, order := range []string{"after", "before", "first"} {
			tarFile := filepath.Join(dir, "link-"+order+".tar")
			bad := map[string]string{"first": "s0.cls"}[order]
			if bad == "" {
				bad = "s2.cls"
			}
			for _, fill := range [][]string{{"--fill-missing"}, nil} {
				args := append(append(append([]string{}, cmd...), fill...), tarFile, filepath.Join(dir, fmt.Sprintf("%s-%s-%d", cmd[0], order, len(fill))))
				_, errs, code, _ := runWithin(t, 30*time.Second, args...)
				assert.Equal(t, 1, code, "%v: %s", args, errs)
				oneLine(t, errs, `member "`+bad+`" is a symbolic link (to "/etc/passwd")`)
			}
		}
	}
}
