package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Pack's reliability on inputs that once made it grow without bound or leave what no mount can
// serve, and after a kill -9: each packs with the built binary.

// writeTable writes a Parquet file of rows rows and cols columns of typ (arrow-go's writer): a
// string column's values are empty, a float32 column's row i of column c is i+c.
func writeTable(t *testing.T, path string, rows, cols int, typ arrow.DataType) {
	t.Helper()
	var fields []arrow.Field
	for c := range cols {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%05d", c), Type: typ})
	}
	schema := arrow.NewSchema(fields, nil)
	f, err := os.Create(path)
	require.NoError(t, err)
	w, err := pqarrow.NewFileWriter(schema, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(1<<20)), pqarrow.DefaultWriterProps())
	require.NoError(t, err)
	for at := 0; at < rows; at += 1 << 16 {
		n := min(1<<16, rows-at)
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for c := range cols {
			switch fb := b.Field(c).(type) {
			case *array.StringBuilder:
				fb.AppendStringValues(make([]string, n), nil)
			case *array.Float32Builder:
				for i := range n {
					fb.Append(float32(at + i + c))
				}
			}
		}
		rec := b.NewRecordBatch()
		require.NoError(t, w.Write(rec))
		rec.Release()
		b.Release()
	}
	require.NoError(t, w.Close())
}

// TestPackEmptyValuesMemory: 10^7 rows of two columns of empty strings (a 40 KB Parquet file)
// pack within 256 MiB of peak RSS, into blocks that their offsets cut. The blocks were cut by
// the values' bytes alone: one block of 80 MB of offsets per field, and 850 MB of RSS.
func TestPackEmptyValuesMemory(t *testing.T) {
	dir := t.TempDir()
	src, ds := filepath.Join(dir, "empty.parquet"), filepath.Join(dir, "ds")
	writeTable(t, src, 10_000_000, 2, arrow.BinaryTypes.String)
	// VmHWM of pack's own memory: its rusage's ru_maxrss starts at the forking test process's
	// (Linux keeps the high-water mark across fork and exec), which writing the table grew.
	rss := runPeakRSS(t, bin, "pack", "--quiet", src, ds) << 10
	t.Logf("peak RSS %d MiB", rss>>20)
	assert.Less(t, rss, int64(256<<20), "pack's peak RSS")
	blocks, err := filepath.Glob(filepath.Join(ds, "fields", "c00000", "blocks", "*.off"))
	require.NoError(t, err)
	assert.Greater(t, len(blocks), 100, "10^7 offsets of 8 B cut at blocks of 256 KiB")
	assert.Contains(t, mustRun(t, "verify", ds), "ok")
}

// TestPackWideTable: a table of more fields than a mount can serve is refused before anything
// is written, in one line that says what to do; following it packs. (10^4 columns made 160,000
// files that no mount could serve.)
func TestPackWideTable(t *testing.T) {
	dir := t.TempDir()
	src, ds := filepath.Join(dir, "wide.parquet"), filepath.Join(dir, "ds")
	writeTable(t, src, 10, 1100, arrow.PrimitiveTypes.Float32)
	_, errs, code := run(t, "pack", "--quiet", src, ds)
	assert.NotZero(t, code)
	assert.Equal(t, "blockfs: the input has 1100 fields; a mount serves each as a file of its own and needs at least 4.0 MiB of cache for each, 4.3 GiB for all, whatever --mix and --readahead: choose at most 1024 with --columns\n", errs)
	left, _ := os.ReadDir(dir)
	assert.Len(t, left, 1, "nothing written: %v", left)
	out := mustRun(t, "pack", "--quiet", "--columns", "c00000,c00001,c01099", src, ds)
	assert.Contains(t, out, "packed 10 samples")
}

// TestMountFieldsCacheAdvice: a dataset with more fields than --cache-size has room for is
// refused with advice that works: lowering --mix and --readahead cannot help (each field takes
// 4 MiB of the cache whatever they are), so it names the least the fields need, and a mount
// with that --cache-size works.
func TestMountFieldsCacheAdvice(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	src, ds := filepath.Join(dir, "t.parquet"), filepath.Join(dir, "ds")
	writeTable(t, src, 100, 40, arrow.PrimitiveTypes.Float32)
	mustRun(t, "pack", "--quiet", src, ds)
	mnt := t.TempDir()
	for _, extra := range [][]string{nil, {"--mix", "1", "--readahead", "0"}} {
		_, errs, code := run(t, append([]string{"mount", "--cache-size", "64MiB"}, append(extra, ds, mnt)...)...)
		assert.Equal(t, 2, code, "%s", errs)
		assert.Contains(t, errs, "--cache-size 64 MiB is too small for "+ds+": its 40 fields need at least 160 MiB whatever --mix and --readahead")
		assert.Contains(t, errs, "raise --cache-size, or pack fewer fields (blockfs pack --columns)")
		assert.NotContains(t, errs, "lower --readahead", "advice that cannot work")
	}
	m := mountAt(t, ds, mnt, "--cache-size", "160MiB")
	vals := fieldValues(t, m.path("epoch-0001.c00039"), 4)
	assert.Len(t, vals, 100)
}

// TestPackKilledCleanedUp: a pack killed with SIGKILL leaves its temporary directory; the next
// pack of the same destination (or pack --clean) removes it, but never the directory of a
// pack still running (here stopped with SIGSTOP).
func TestPackKilledCleanedUp(t *testing.T) {
	raw := sparseFile(t, "big.raw", 2<<30)
	parent := t.TempDir()
	ds := filepath.Join(parent, "ds")
	var seen []string // the temporary directories of the packs started
	start := func() (*exec.Cmd, string) {
		cmd := exec.Command(bin, "pack", "--quiet", "--format", "raw", "--record-size", "4096", "--block-size", "64KiB", "--no-shuffle", raw, ds)
		require.NoError(t, cmd.Start())
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			// A temporary directory of this process's with a block written.
			m, _ := filepath.Glob(filepath.Join(parent, ".ds.tmp-*", "blocks", "000001.bin"))
			for _, b := range m {
				tmp := filepath.Dir(filepath.Dir(b))
				if !slices.Contains(seen, tmp) {
					seen = append(seen, tmp)
					return cmd, tmp
				}
			}
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("pack wrote no block in 30 s")
		return nil, ""
	}
	killed, killedTmp := start()
	require.NoError(t, killed.Process.Signal(syscall.SIGKILL))
	killed.Wait()
	require.DirExists(t, killedTmp, "SIGKILL leaves it")

	live, liveTmp := start()
	require.NoError(t, live.Process.Signal(syscall.SIGSTOP))
	defer func() {
		live.Process.Kill()
		live.Wait()
	}()
	small := filepath.Join(t.TempDir(), "small.raw")
	require.NoError(t, os.WriteFile(small, make([]byte, 4096*10), 0o644))
	mustRun(t, "pack", "--quiet", "--format", "raw", "--record-size", "4096", small, ds)
	assert.NoDirExists(t, killedTmp, "the killed pack's directory is removed")
	assert.NoFileExists(t, killedTmp+".lock")
	assert.DirExists(t, liveTmp, "the stopped pack's is left alone")

	// Killed too: pack --clean removes its directory, and says so.
	out := mustRun(t, "pack", "--clean", ds)
	assert.Contains(t, out, "nothing to remove", "a stopped pack's directory is not removed")
	require.NoError(t, live.Process.Signal(syscall.SIGKILL))
	live.Wait()
	assert.Equal(t, "removed "+liveTmp+"\n", mustRun(t, "pack", "--clean", ds))
	mustRun(t, "pack", "--quiet", "--force", "--format", "raw", "--record-size", "4096", small, ds)
	left, err := filepath.Glob(filepath.Join(parent, ".ds*"))
	require.NoError(t, err)
	assert.Empty(t, left)
	assert.Regexp(t, regexp.MustCompile(`ok`), mustRun(t, "verify", ds))
}
