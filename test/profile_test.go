package test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCPUProfile: the hidden --cpuprofile FILE makes a --daemon mount write its CPU profile to
// FILE and its lock profile to FILE.mutex (gzipped pprof, their sample types named, private to
// the user) once it has stopped (unmount does not wait for the daemon's exit); a symbolic link
// planted at FILE is refused with one line, the mount not made.
func TestCPUProfile(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	p := packRaw(t, 200, "64KiB")
	dir := t.TempDir()
	prof := filepath.Join(dir, "daemon.pprof")
	mnt := t.TempDir()
	unmountedAtEnd(t, mnt)
	mustRun(t, "mount", "--daemon", "--cpuprofile", prof, "--cache-size", "8MiB", p.dir, mnt)
	for _, e := range []string{"epoch-0000", "epoch-0001"} {
		b, err := os.ReadFile(filepath.Join(mnt, e))
		require.NoError(t, err)
		require.Len(t, b, 200*recordSize)
	}
	mustRun(t, "unmount", mnt)
	for path, types := range map[string][]string{prof: {"samples", "cpu", "nanoseconds"}, prof + ".mutex": {"contentions", "delay"}} {
		b := waitGunzip(t, path)
		for _, ty := range types {
			assert.True(t, bytes.Contains(b, []byte(ty)), "%s names sample type %q", path, ty)
		}
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), path)
	}

	planted := filepath.Join(dir, "planted")
	require.NoError(t, os.Symlink(filepath.Join(dir, "elsewhere"), planted))
	_, errs, code := run(t, "mount", "--daemon", "--cpuprofile", planted, "--cache-size", "8MiB", p.dir, mnt)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "--cpuprofile: create "+planted+": a symbolic link: give the file's own path")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
	assert.False(t, isMounted(mnt))
	assert.NoFileExists(t, filepath.Join(dir, "elsewhere"))
}

// waitGunzip returns the decompressed contents of the gzipped file at path once it is all
// there (the daemon writes it as it exits), within 10 seconds.
func waitGunzip(t *testing.T, path string) []byte {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var b []byte
		if b, err = gunzip(path); err == nil {
			return b
		}
	}
	t.Fatalf("%s: %v", path, err)
	return nil
}

func gunzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(z)
}

// TestFuseTuningFlags: the hidden flags of the FUSE path's benchmarks (bench/fuse_options.sh)
// serve the same bytes as the defaults, with four readers at once through one request reader
// and two requests in flight for readahead; out of range, each is refused in one line.
func TestFuseTuningFlags(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	p := packRaw(t, 400, "64KiB")
	plain := mount(t, p.dir, "--cache-size", "16MiB")
	tuned := mount(t, p.dir, "--cache-size", "16MiB", "--fuse-readers", "1", "--max-background", "2")
	for e := 1; e <= 2; e++ {
		want, got := make([][]byte, 4), make([][]byte, 4)
		errs := make(chan error, 4)
		for r := range 4 {
			name := fmt.Sprintf("shard-%d-of-4/epoch-%04d", r, e)
			go func() {
				var err error
				got[r], err = os.ReadFile(tuned.path(name))
				errs <- err
			}()
			var err error
			want[r], err = os.ReadFile(plain.path(name))
			require.NoError(t, err)
		}
		for range 4 {
			require.NoError(t, <-errs)
		}
		for r := range 4 {
			require.NotEmpty(t, want[r])
			assert.True(t, bytes.Equal(want[r], got[r]), "epoch %d shard %d", e, r)
		}
	}
	for _, bad := range [][]string{{"--fuse-readers", "17"}, {"--max-background", "0"}} {
		_, errs, code := run(t, append([]string{"mount"}, append(bad, p.dir, t.TempDir())...)...)
		assert.Equal(t, 2, code, bad)
		assert.Contains(t, errs, bad[0]+" "+bad[1]+" is out of range", bad)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
	}
}
