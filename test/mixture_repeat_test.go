package test

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A mixture whose small source of variable-length records is drawn 10^7 or 2^47 times an
// epoch mounts, lists, and answers a 1 MiB read anywhere within 5 s, the daemon within its
// cache plus 64 MiB; a source so small that one read would cross more than half a million of
// its passes is refused in one line. (Before, a read listed one segment per pass and built
// each pass's order for every byte offset it looked up: minutes a read, and 2^47 grew the
// daemon until the kernel killed it.)
func TestMixtureHugeRepeat(t *testing.T) {
	dir := t.TempDir()
	a := linesSource(t, dir, "a", 1, 500)
	v := &mixSrc{tag: 2, n: 3, dir: filepath.Join(dir, "v"), lines: [][]byte{[]byte("a"), []byte("b"), []byte("c")}}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "v.txt"), []byte("a\nb\nc\n"), 0o644))
	mustRun(t, "pack", "--quiet", "--format", "lines", filepath.Join(dir, "v.txt"), v.dir)
	const cache = 128 << 20
	for _, rule := range []string{`"repeat": 10000000`, `"records": 140737488355328`} {
		t.Run(strings.Fields(rule)[0], func(t *testing.T) {
			mix := writeMixture(t, dir, "mix.json", fmt.Sprintf(`{"sources": [{"data": %q, "repeat": 1}, {"data": %q, %s}]}`, a.dir, v.dir, rule))
			start := time.Now()
			m := mount(t, mix, "--cache-size", "128MiB")
			st, err := os.Stat(m.path("epoch-0000"))
			require.NoError(t, err)
			require.Less(t, time.Since(start), 10*time.Second, "mount and stat")
			f, err := os.Open(m.path("epoch-0000"))
			require.NoError(t, err)
			defer f.Close()
			r := rand.New(rand.NewSource(5))
			for _, off := range []int64{r.Int63n(st.Size() - 1<<20), st.Size() - 1<<20} {
				buf := make([]byte, 1<<20)
				start := time.Now()
				_, err := f.ReadAt(buf, off)
				require.NoError(t, err)
				require.Less(t, time.Since(start), 5*time.Second, "a 1 MiB read at %d of %d", off, st.Size())
				checkMixRange(t, m, []*mixSrc{a, v}, off, buf)
			}
			require.LessOrEqual(t, peakRSS(t, m.cmd.Process.Pid)<<10, int64(cache+64<<20), "the daemon's peak RSS")
		})
	}
	// One record of one byte drawn 10^7 times: a 1 MiB read would cross 10^6 passes.
	one := filepath.Join(dir, "one")
	require.NoError(t, os.WriteFile(one+".txt", []byte("x\n"), 0o644))
	mustRun(t, "pack", "--quiet", "--format", "lines", one+".txt", one)
	mix := writeMixture(t, dir, "one.json", fmt.Sprintf(`{"sources": [{"data": %q, "repeat": 1}, {"data": %q, "repeat": 10000000}]}`, a.dir, one))
	_, stderr, code := run(t, "mount", mix, t.TempDir())
	require.Equal(t, 2, code, stderr)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %s", stderr)
	require.Contains(t, stderr, "passes of its order")
}

// checkMixRange checks that buf, read at off of a mixture's epoch 0, is the records its .ids,
// .source and .offsets say, reading only their part for the range.
func checkMixRange(t *testing.T, m *mounted, srcs []*mixSrc, off int64, buf []byte) {
	t.Helper()
	offs := openRead(t, m.path("epoch-0000.offsets"))
	n := (offs.size / 8) - 1
	at := func(p int64) uint64 { return binary.LittleEndian.Uint64(offs.read(t, 8*p, 8)) }
	// the first record ending past off, by bisection over the offsets
	lo, hi := int64(0), n
	for lo < hi {
		mid := (lo + hi) / 2
		if at(mid+1) > uint64(off) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	p0, end := lo, uint64(off)+uint64(len(buf))
	k := int64(0)
	for p0+k < n && at(p0+k) < end {
		k++
	}
	rel := offs.read(t, 8*p0, 8*(k+1))
	ids := openRead(t, m.path("epoch-0000.ids")).read(t, 8*p0, 8*k)
	src := openRead(t, m.path("epoch-0000.source")).read(t, 2*p0, 2*k)
	var got []byte
	for x := range k {
		s := srcs[binary.LittleEndian.Uint16(src[2*x:])]
		rec := s.record(binary.LittleEndian.Uint64(ids[8*x:]))
		require.Equal(t, binary.LittleEndian.Uint64(rel[8*x:])+uint64(len(rec)), binary.LittleEndian.Uint64(rel[8*x+8:]), "record %d's length", p0+x)
		got = append(got, rec...)
	}
	skip := uint64(off) - binary.LittleEndian.Uint64(rel)
	require.Equal(t, got[skip:skip+uint64(len(buf))], buf, "bytes at %d", off)
}

// readFile is an open file read at offsets.
type readFile struct {
	f    *os.File
	size int64
}

func openRead(t *testing.T, path string) *readFile {
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	require.NoError(t, err)
	return &readFile{f, st.Size()}
}

func (r *readFile) read(t *testing.T, off, n int64) []byte {
	b := make([]byte, n)
	_, err := r.f.ReadAt(b, off)
	require.NoError(t, err)
	return b
}
