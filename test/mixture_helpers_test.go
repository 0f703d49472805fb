package test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The mixture tests (docs/SHUFFLE.md, "Mixtures: several datasets in one epoch") mount a
// mixture file of small sources whose records say what they are: a fixed-size record holds
// its id and its dataset's tag in its first bytes and bytes derived from both after them, a
// line its number and tag. So every record an epoch serves is checked against the record its
// .ids and .source say it is.

// mixSrc is one dataset a mixture test draws from.
type mixSrc struct {
	tag   int      // the dataset's tag in its records
	n     int      // records
	size  int      // bytes per record; 0: lines, one record per line
	lines [][]byte // the lines (size 0)
	raw   string   // the raw input file (size > 0), which a source may serve in place
	dir   string   // the packed dataset
}

// mixRecord is record id of the dataset tagged tag, size bytes.
func mixRecord(tag int, id uint64, size int) []byte {
	b := make([]byte, size)
	binary.LittleEndian.PutUint64(b, id)
	binary.LittleEndian.PutUint16(b[8:], uint16(tag))
	for k := 10; k < size; k++ {
		b[k] = byte(id*131 + uint64(tag)*17 + uint64(k))
	}
	return b
}

// record is the dataset's record id, as its pack (or the file in place) holds it.
func (s *mixSrc) record(id uint64) []byte {
	if s.size == 0 {
		return s.lines[id]
	}
	return mixRecord(s.tag, id, s.size)
}

// rawSource writes n records of size bytes tagged tag to dir/name.bin and packs them into
// dir/name with the CLI.
func rawSource(t *testing.T, dir, name string, tag, n, size int, packFlags ...string) *mixSrc {
	t.Helper()
	s := &mixSrc{tag: tag, n: n, size: size, raw: filepath.Join(dir, name+".bin"), dir: filepath.Join(dir, name)}
	var buf bytes.Buffer
	for i := range n {
		buf.Write(mixRecord(tag, uint64(i), size))
	}
	require.NoError(t, os.WriteFile(s.raw, buf.Bytes(), 0o644))
	mustRun(t, append(append([]string{"pack", "--quiet", "--format", "raw", "--record-size", strconv.Itoa(size)}, packFlags...), s.raw, s.dir)...)
	return s
}

// linesSource writes n JSON lines of varying length (one empty) to dir/name.jsonl and packs
// them into dir/name: variable-length records.
func linesSource(t *testing.T, dir, name string, tag, n int) *mixSrc {
	t.Helper()
	s := &mixSrc{tag: tag, n: n, dir: filepath.Join(dir, name)}
	var buf bytes.Buffer
	for i := range n {
		line := []byte(fmt.Sprintf(`{"i":%d,"tag":%d,"pad":"%s"}`, i, tag, strings.Repeat("x", i*37%150)))
		if i == 5 {
			line = []byte{}
		}
		s.lines = append(s.lines, line)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	path := filepath.Join(dir, name+".jsonl")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	mustRun(t, "pack", "--quiet", path, s.dir)
	return s
}

// writeMixture writes a mixture file (JSON as written: "0.7" stays 0.7) in dir.
func writeMixture(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// mixEpoch is what a mount serves of one epoch (or one shard's part of it).
type mixEpoch struct {
	data []byte
	ids  []uint64
	src  []uint16
	offs []uint64 // nil when records have one size
}

// readMixEpoch reads epoch e of the mount under dir ("" or "shard-R-of-W/") with os.ReadFile.
func readMixEpoch(t *testing.T, m *mounted, dir string, e int) mixEpoch {
	t.Helper()
	name := m.path(fmt.Sprintf("%sepoch-%04d", dir, e))
	var ep mixEpoch
	var err error
	ep.data, err = os.ReadFile(name)
	require.NoError(t, err)
	raw, err := os.ReadFile(name + ".ids")
	require.NoError(t, err)
	require.Zero(t, len(raw)%8, "%s.ids", name)
	for i := 0; i < len(raw); i += 8 {
		ep.ids = append(ep.ids, binary.LittleEndian.Uint64(raw[i:]))
	}
	raw, err = os.ReadFile(name + ".source")
	require.NoError(t, err)
	require.Zero(t, len(raw)%2, "%s.source", name)
	for i := 0; i < len(raw); i += 2 {
		ep.src = append(ep.src, binary.LittleEndian.Uint16(raw[i:]))
	}
	require.Equal(t, len(ep.ids), len(ep.src), "%s: .ids and .source disagree on the records", name)
	if raw, err = os.ReadFile(name + ".offsets"); err == nil {
		require.Equal(t, 8*(len(ep.ids)+1), len(raw), "%s.offsets holds records+1 offsets", name)
		for i := 0; i < len(raw); i += 8 {
			ep.offs = append(ep.offs, binary.LittleEndian.Uint64(raw[i:]))
		}
	} else {
		require.ErrorIs(t, err, os.ErrNotExist)
	}
	return ep
}

// record returns the bytes of record k of the epoch.
func (ep *mixEpoch) record(k int, size int) []byte {
	if ep.offs != nil {
		return ep.data[ep.offs[k]:ep.offs[k+1]]
	}
	return ep.data[k*size : (k+1)*size]
}

// checkRecords requires that every record of ep is the record of srcs[source] at its id.
func checkRecords(t *testing.T, ep mixEpoch, srcs []*mixSrc, what string) {
	t.Helper()
	size := srcs[0].size
	if ep.offs == nil {
		require.Equal(t, len(ep.ids)*size, len(ep.data), "%s: one size of record, %d bytes each", what, size)
	} else {
		require.Zero(t, ep.offs[0], what)
		require.EqualValues(t, len(ep.data), ep.offs[len(ep.offs)-1], "%s: the last offset is the data's size", what)
	}
	for k, id := range ep.ids {
		s := int(ep.src[k])
		require.Less(t, s, len(srcs), "%s: record %d: source %d", what, k, s)
		require.Less(t, id, uint64(srcs[s].n), "%s: record %d: id %d of source %d", what, k, id, s)
		if ep.offs != nil {
			require.LessOrEqual(t, ep.offs[k], ep.offs[k+1], "%s: offsets decrease at %d", what, k)
		}
		if got, want := ep.record(k, size), srcs[s].record(id); !bytes.Equal(got, want) {
			t.Fatalf("%s: record %d (source %d, id %d) is %d bytes %x..., want %d bytes %x...", what, k, s, id,
				len(got), got[:min(16, len(got))], len(want), want[:min(16, len(want))])
		}
	}
}

// counts returns the records of each of n sources in ep.
func (ep *mixEpoch) counts(n int) []int {
	c := make([]int, n)
	for _, s := range ep.src {
		c[s]++
	}
	return c
}

// draws returns source s's ids in the epoch's order (its draws, in draw order).
func (ep *mixEpoch) draws(s int) []uint64 {
	var out []uint64
	for k, id := range ep.ids {
		if int(ep.src[k]) == s {
			out = append(out, id)
		}
	}
	return out
}

// checkPasses requires that a source's draws over consecutive epochs, cut into passes of n,
// hold each id once per pass (a whole pass is a permutation of 0..n-1, the last may be cut
// short) and that each pass is a new order.
func checkPasses(t *testing.T, draws []uint64, n int, what string) {
	t.Helper()
	var prev []uint64
	for p := 0; p*n < len(draws); p++ {
		pass := draws[p*n : min(len(draws), (p+1)*n)]
		seen := make([]bool, n)
		for _, id := range pass {
			require.Less(t, id, uint64(n), "%s: pass %d", what, p)
			require.False(t, seen[id], "%s: pass %d draws id %d twice (each record once before any twice)", what, p, id)
			seen[id] = true
		}
		if prev != nil {
			require.False(t, slices.Equal(prev[:len(pass)], pass), "%s: pass %d repeats pass %d's order", what, p, p-1)
		}
		prev = pass
	}
}

// requireSame requires got to equal want, naming the first difference (not printing both).
func requireSame[T comparable](t *testing.T, want, got []T, what string) {
	t.Helper()
	for k := range min(len(want), len(got)) {
		if want[k] != got[k] {
			t.Fatalf("%s: element %d is %v, want %v", what, k, got[k], want[k])
		}
	}
	if len(want) != len(got) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
}

// mixInfo reads the mount's info.json, numbers kept exact (a seed is a uint64).
func mixInfo(t *testing.T, m *mounted) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(m.path(".blockfs/info.json"))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var info map[string]any
	require.NoError(t, dec.Decode(&info))
	return info
}

// infoSource returns info.json's sources[i].
func infoSource(t *testing.T, info map[string]any, i int) map[string]any {
	t.Helper()
	srcs, ok := info["sources"].([]any)
	require.True(t, ok, "info.json has sources")
	require.Greater(t, len(srcs), i)
	return srcs[i].(map[string]any)
}
