package test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// debianPackages maps a Python module to the Debian package scripts/deps.txt installs it with
// (the list make test and .ci/run install from).
func debianPackages(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("../scripts/deps.txt")
	require.NoError(t, err)
	defer f.Close()
	pkgs := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		cols := strings.Fields(line)
		if len(cols) < 2 || cols[1] == "-" {
			continue
		}
		for _, m := range strings.Split(cols[1], ",") {
			pkgs[m] = cols[0]
		}
	}
	require.NoError(t, sc.Err())
	return pkgs
}

// requirePython returns Debian's python3 (BLOCKFS_PYTHON overrides) once it imports every one
// of modules. Where one is missing the test skips, naming the Debian packages of
// scripts/deps.txt that make test installs as root; under BLOCKFS_REQUIRE_FUSE=1 (CI) it fails.
func requirePython(t *testing.T, modules ...string) string {
	t.Helper()
	py := os.Getenv("BLOCKFS_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	out, err := exec.Command(py, "-c", "import "+strings.Join(modules, ", ")).CombinedOutput()
	if err == nil {
		return py
	}
	pkgs := debianPackages(t)
	var names []string
	for _, m := range modules {
		p, ok := pkgs[m]
		require.True(t, ok, "the test imports %s, which scripts/deps.txt does not list", m)
		names = append(names, p)
	}
	msg := fmt.Sprintf("%s cannot import %s (scripts/deps.txt: apt-get install %s): %v %s",
		py, strings.Join(modules, ", "), strings.Join(names, " "), err, lastLine(string(out)))
	if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// hideModules returns a folder that, first on PYTHONPATH, makes importing any of modules raise
// ModuleNotFoundError, as on a machine that lacks them, whether this one has them or not; a
// Python run's own workers inherit it with the environment.
func hideModules(t *testing.T, modules ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, m := range modules {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, m), 0o755))
		stub := fmt.Sprintf("raise ModuleNotFoundError(%q, name=%q)\n", "No module named '"+m+"' (hidden by the test)", m)
		require.NoError(t, os.WriteFile(filepath.Join(dir, m, "__init__.py"), []byte(stub), 0o644))
	}
	return dir
}
