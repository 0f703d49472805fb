package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPythonPackage installs python/ the way docs/USAGE.md says, into a fresh venv with no
// package index (Debian's setuptools builds it), and runs the package's own tests
// (python/tests: the Loader's order, ranks and resume contracts, Mount's sharing and clean-up)
// against the installed copy and the built binary. Nothing may stay mounted afterwards.
func TestPythonPackage(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // one core's work (a Python reader and the daemon taking turns): beside the tests that mostly wait
	py := systemPython(t)
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", "--system-site-packages", venv).CombinedOutput(); err != nil {
		msg := "cannot make a venv (apt-get install python3-venv python3-pip): " + string(out)
		if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// pip builds in the source tree (build/, *.egg-info): install from a copy.
	src := filepath.Join(t.TempDir(), "python")
	out, err := exec.Command("cp", "-r", "../python", src).CombinedOutput()
	require.NoError(t, err, "%s", out)
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation", "--quiet", src)
	pip.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1")
	out, err = pip.CombinedOutput()
	require.NoError(t, err, "pip install: %s", out)
	vpy := filepath.Join(venv, "bin", "python")
	out, err = exec.Command(vpy, "-c", "import blockfs, blockfs.torch; print(blockfs.__file__)").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.True(t, strings.HasPrefix(strings.TrimSpace(string(out)), venv), "imported from the venv: %s", out)

	tests, err := filepath.Abs("../python/tests")
	require.NoError(t, err)
	runtime := runtimeDir(t)
	// test_s3.py mounts s3:// datasets from a MinIO of its own (startMinio sets the AWS
	// credential variables the children inherit).
	srv := startMinio(t)
	srv.bucket("pytests")
	cmd := exec.Command(vpy, "-m", "unittest", "discover", "-v", "-s", tests)
	cmd.Dir = t.TempDir() // not the source tree: blockfs comes from the venv
	cmd.Env = append(os.Environ(), "BLOCKFS_BIN="+bin, "BLOCKFS_RUNTIME_DIR="+runtime, "PYTHONDONTWRITEBYTECODE=1",
		"BLOCKFS_TEST_S3_ENDPOINT="+srv.endpoint(), "BLOCKFS_TEST_S3_BUCKET=pytests")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "python/tests:\n%s", out)
	t.Logf("python/tests: %s", lastLine(string(out)))
	require.Regexp(t, `test_mount_and_loader_from_s3 \(test_s3\.S3Test[^)]*\)[^\n]*\.\.\. ok`, string(out), "the s3:// test ran")
	require.NotContains(t, string(out), "skipped", "no python test skipped")
	assertLeftNothing(t, runtime)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
