package test

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wheelPlatforms are the wheel platform tags of the Go targets make wheel builds for.
var wheelPlatforms = map[string]string{"amd64": "linux_x86_64", "arm64": "linux_aarch64", "ppc64le": "linux_ppc64le",
	"s390x": "linux_s390x", "riscv64": "linux_riscv64"}

// TestWheel builds the wheel as the README says (make wheel) and installs it the way a training
// machine with no Go and no network would: into a fresh venv (no system site-packages) with pip
// --no-index. The wheel carries a static binary whose --version is the package's; the venv's
// blockfs command runs it with no other blockfs on PATH and no BLOCKFS_BIN; and blockfs.Mount
// from the venv's python finds it (blockfs.binary() is the one inside the installed package),
// mounts a file in place, reads records that match the file, and leaves nothing mounted.
func TestWheel(t *testing.T) {
	requireFUSE(t)
	py := systemPython(t)
	if out, err := exec.Command(py, "-c", "import setuptools, wheel, pip, ensurepip").CombinedOutput(); err != nil {
		msg := "cannot build or install a wheel (apt-get install python3-setuptools python3-wheel python3-pip python3-venv): " + string(out)
		if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	plat, ok := wheelPlatforms[runtime.GOARCH]
	if !ok {
		t.Skipf("make wheel does not build for %s", runtime.GOARCH)
	}
	src, err := os.ReadFile("../python/blockfs/__init__.py")
	require.NoError(t, err)
	v := regexp.MustCompile(`(?m)^__version__ = "([^"]+)"`).FindSubmatch(src)
	require.NotNil(t, v, "python/blockfs/__init__.py has no __version__")
	version := string(v[1])

	dist := t.TempDir()
	out, err := exec.Command("make", "--no-print-directory", "-C", "..", "wheel", "DIST="+dist, "PYTHON="+py).CombinedOutput()
	require.NoError(t, err, "make wheel: %s", out)
	whl := filepath.Join(dist, "blockfs-"+version+"-py3-none-"+plat+".whl")
	t.Logf("make wheel: %s", lastLine(string(out)))
	checkWheel(t, whl, version, plat)

	venv := filepath.Join(t.TempDir(), "venv")
	out, err = exec.Command(py, "-m", "venv", venv).CombinedOutput()
	require.NoError(t, err, "python3 -m venv: %s", out)
	// Only Debian's and the venv's own directories on PATH, and nothing of this test's blockfs.
	for _, d := range []string{"/usr/bin", "/bin"} {
		_, err := os.Stat(filepath.Join(d, "blockfs"))
		require.True(t, os.IsNotExist(err), "%s/blockfs exists: the test cannot tell which blockfs runs", d)
	}
	env := []string{"PATH=" + filepath.Join(venv, "bin") + ":/usr/bin:/bin", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1"}
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "PATH", "BLOCKFS_BIN", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV":
		default:
			env = append(env, kv)
		}
	}
	runIn := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = env, t.TempDir() // not the source tree: blockfs comes from the venv
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
		return strings.TrimSpace(string(out))
	}
	// No index, and no numpy in the venv yet: the command needs only the wheel.
	runIn(filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--no-deps", "--quiet", whl)
	assert.Equal(t, filepath.Join(venv, "bin", "blockfs")+"\nblockfs version "+version,
		runIn("sh", "-c", "command -v blockfs && blockfs --version"), "the venv's blockfs command runs the wheel's binary")

	// The wheel's one dependency, numpy, from Debian's python3-numpy (there is no index): a .pth
	// line puts its directory after the venv's own site-packages, which hold the wheel's blockfs.
	site := runIn(filepath.Join(venv, "bin", "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
	out, err = exec.Command(py, "-c", "import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))").Output()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(site, "debian-numpy.pth"), out, 0o644))

	const n, rs = 1000, 16
	data := filepath.Join(t.TempDir(), "records.bin")
	raw := make([]byte, n*rs)
	for i := range raw {
		raw[i] = byte(i*7 + i/rs)
	}
	require.NoError(t, os.WriteFile(data, raw, 0o644))
	runtime := runtimeDir(t)
	env = append(env, "BLOCKFS_RUNTIME_DIR="+runtime)
	script := `import os, sys
import numpy as np
import blockfs
venv, data, n, rs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
assert blockfs.__file__.startswith(venv + os.sep), blockfs.__file__
exe = blockfs.binary()
assert exe == os.path.join(os.path.dirname(blockfs.__file__), "_bin", "blockfs"), exe
with blockfs.Mount(data, record_size=rs, block_size="4KiB", seed=2) as m:
    ids = blockfs.order(m, 0)[:8]
    with open(blockfs.epoch_path(m, 0), "rb") as f:
        head = f.read(8 * rs)
src = np.fromfile(data, dtype=np.uint8).reshape(n, rs)
assert head == src[ids.astype(np.int64)].tobytes(), "the epoch's first records are not the file's"
print(f"read records {ids.tolist()} with {exe}")`
	got := runIn(filepath.Join(venv, "bin", "python"), "-c", script, venv, data, strconv.Itoa(n), strconv.Itoa(rs))
	t.Log(got)
	assert.Contains(t, got, filepath.Join(site, "blockfs", "_bin", "blockfs"))

	assertLeftNothing(t, runtime)
}

// checkWheel checks what whl holds: the binary, executable and for Linux (an ELF file), inside
// the package; the blockfs command; and a platform tag.
func checkWheel(t *testing.T, whl, version, plat string) {
	t.Helper()
	z, err := zip.OpenReader(whl)
	require.NoError(t, err, "make wheel wrote no %s", filepath.Base(whl))
	defer z.Close()
	files := map[string]*zip.File{}
	for _, f := range z.File {
		files[f.Name] = f
	}
	read := func(name string) []byte {
		f := files[name]
		require.NotNil(t, f, "the wheel has no %s", name)
		r, err := f.Open()
		require.NoError(t, err)
		defer r.Close()
		b, err := io.ReadAll(r)
		require.NoError(t, err)
		return b
	}
	exe := read("blockfs/_bin/blockfs")
	assert.True(t, bytes.HasPrefix(exe, []byte("\x7fELF")), "blockfs/_bin/blockfs is an ELF executable")
	assert.NotZero(t, files["blockfs/_bin/blockfs"].Mode()&0o111, "blockfs/_bin/blockfs is executable")
	cmd := read("blockfs-" + version + ".data/scripts/blockfs")
	assert.True(t, bytes.HasPrefix(cmd, []byte("#!python\n")), "pip points the command at the environment's python")
	assert.NotZero(t, files["blockfs-"+version+".data/scripts/blockfs"].Mode()&0o111)
	meta := string(read("blockfs-" + version + ".dist-info/WHEEL"))
	assert.Contains(t, meta, "Tag: py3-none-"+plat+"\n")
	assert.Contains(t, meta, "Root-Is-Purelib: false\n")
	assert.Contains(t, string(read("blockfs-"+version+".dist-info/METADATA")), "Requires-Dist: numpy")
	read("blockfs/py.typed")
}
