// Package test mounts the built blockfs binary and reads it the way users do.
package test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blockfs/blockfs/internal/mountinfo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bin is the blockfs binary built by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "blockfs-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "blockfs")
	for k, v := range storeEnv {
		os.Setenv(k, v)
	}
	if err := trustTestServers(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, self, _, _ := runtime.Caller(0)
	for _, args := range [][]string{{"-o", bin}, {"-tags", "tables", "-o", bin + "-tables"}} {
		// blockfs, and beside it blockfs-tables, which pack runs to read Parquet and Arrow.
		build := exec.Command("go", append(append([]string{"build"}, args...), "./cmd/blockfs")...)
		build.Dir = filepath.Dir(filepath.Dir(self))
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building blockfs: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireFUSE skips when this machine cannot mount FUSE, unless BLOCKFS_REQUIRE_FUSE=1 (set
// by CI), in which case it fails: CI can never pass by skipping.
func requireFUSE(t *testing.T) {
	t.Helper()
	why := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		why = "/dev/fuse is missing"
	} else if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			why = "not root and no fusermount3"
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
		t.Fatalf("FUSE is required (BLOCKFS_REQUIRE_FUSE=1) but %s", why)
	}
	t.Skipf("cannot mount FUSE here: %s", why)
}

// requireRoot skips a test that needs root, unless BLOCKFS_REQUIRE_FUSE=1 (CI), where a skip
// would let it pass untested: it fails instead.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("BLOCKFS_REQUIRE_FUSE") == "1" {
		t.Fatalf("BLOCKFS_REQUIRE_FUSE=1, but this test needs root %s", why)
	}
	t.Skipf("needs root %s", why)
}

// run runs blockfs with args and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runEnv(t, nil, args...)
}

// runEnv is run with the variables of env (KEY=VALUE) set for the command over the test's.
func runEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running blockfs %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// mustRun runs blockfs and fails the test unless it exits 0.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := run(t, args...)
	require.Zero(t, code, "blockfs %v: %s", args, errs)
	return out
}

// unmountedAtEnd checks, when the test ends, that nothing is left mounted at mnt (a --daemon
// mount the test made itself): one that is gets detached, and the test fails.
func unmountedAtEnd(t *testing.T, mnt string) {
	t.Cleanup(func() {
		if isMounted(mnt) {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
			t.Error("left mounted")
		}
	})
}

// mounted is a blockfs mount running in a foreground subprocess.
type mounted struct {
	t      *testing.T
	dir    string
	cmd    *exec.Cmd
	stderr *logFile
	exited chan error
}

// logFile is a daemon's stderr, written by the daemon straight to a file: a line it wrote
// before answering a read is there when the read returns (through a pipe, this process's
// copying goroutine could lag behind the answer).
type logFile struct{ f *os.File }

func newLogFile(t *testing.T) *logFile {
	f, err := os.CreateTemp(t.TempDir(), "stderr-")
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return &logFile{f: f}
}

// String returns what the daemon has written so far.
func (l *logFile) String() string {
	b, _ := os.ReadFile(l.f.Name())
	return string(b)
}

// mount starts `blockfs mount ARGS DATA MNT` in the foreground, waits until the mount is up
// and registers its cleanup (SIGTERM, then a check that nothing is left mounted).
func mount(t *testing.T, data string, args ...string) *mounted {
	t.Helper()
	return mountAt(t, data, t.TempDir(), args...)
}

// mountAt is mount at a given, existing, empty directory.
func mountAt(t *testing.T, data, mnt string, args ...string) *mounted {
	t.Helper()
	return mountBinary(t, bin, data, mnt, args...)
}

// mountBinary is mountAt with a given blockfs binary.
func mountBinary(t *testing.T, binary, data, mnt string, args ...string) *mounted {
	t.Helper()
	requireFUSE(t)
	m := &mounted{t: t, dir: mnt, stderr: newLogFile(t), exited: make(chan error, 1)}
	m.cmd = exec.Command(binary, append(append([]string{"mount"}, args...), data, mnt)...)
	m.cmd.Stderr = m.stderr.f
	require.NoError(t, m.cmd.Start())
	go func() { m.exited <- m.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for !isMounted(mnt) {
		select {
		case err := <-m.exited:
			t.Fatalf("blockfs mount exited before mounting (%v): %s", err, m.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = m.cmd.Process.Kill()
			t.Fatalf("blockfs mount not ready after 20s: %s", m.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The kernel lists the mount before the daemon has finished mounting: go-fuse then opens
	// and polls a file of the mount (its poll hack), and a SIGKILL in that moment leaves the
	// dying daemon waiting on its own mount for that file's flush until the mount is aborted
	// (seen in TestKill9AndRemount). The daemon logs "serving" once the mount is done.
	for ready := time.Now().Add(5 * time.Second); !strings.Contains(m.stderr.String(), "blockfs: serving ") && time.Now().Before(ready); {
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { m.stop() })
	return m
}

// stop sends SIGTERM, requires a clean exit 0 and that nothing is left mounted.
func (m *mounted) stop() {
	t := m.t
	if m.cmd.ProcessState != nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-m.exited:
		if err != nil {
			t.Errorf("blockfs mount exited with %v after SIGTERM: %s", err, m.stderr.String())
		}
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		t.Errorf("blockfs mount did not exit within 20s of SIGTERM: %s", m.stderr.String())
	}
	if isMounted(m.dir) {
		_ = syscall.Unmount(m.dir, syscall.MNT_DETACH)
		t.Errorf("%s was left mounted", m.dir)
	}
}

// path returns a path inside the mount.
func (m *mounted) path(name string) string { return filepath.Join(m.dir, name) }

// isMounted reports whether dir is a mount point.
func isMounted(dir string) bool {
	_, ok := mountEntry(dir)
	return ok
}

// mountEntry returns the last mount at dir in /proc/self/mountinfo (the one seen there).
func mountEntry(dir string) (m mountinfo.Mount, ok bool) {
	mounts, _ := mountinfo.Read("/proc/self/mountinfo")
	for _, mi := range mounts {
		if mi.Mountpoint == dir {
			m, ok = mi, true
		}
	}
	return m, ok
}

// sh runs a shell command and returns its stdout.
func sh(t *testing.T, script string) string {
	t.Helper()
	out, err := exec.Command("sh", "-c", script).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("%s: %v: %s", script, err, ee.Stderr)
	}
	require.NoError(t, err, script)
	return string(out)
}

// sparseFile creates a sparse file of size bytes named name in a temporary directory: a huge
// file to serve in place that takes no disk.
func sparseFile(t *testing.T, name string, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	require.NoError(t, err)
	if err := f.Truncate(size); err != nil {
		f.Close()
		t.Fatalf("this filesystem cannot hold a sparse file of %d bytes: %v", size, err)
	}
	require.NoError(t, f.Close())
	return path
}

// mountWithin is mount, requiring the mount to be ready within limit.
func mountWithin(t *testing.T, limit time.Duration, data string, args ...string) *mounted {
	t.Helper()
	start := time.Now()
	m := mount(t, data, args...)
	ready := time.Since(start)
	t.Logf("ready in %v", ready)
	assert.Less(t, ready, limit)
	return m
}

// idsText reads a .ids file of a mount as order --ids prints it.
func idsText(t *testing.T, path string) string {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var b strings.Builder
	for i := 0; i+8 <= len(raw); i += 8 {
		fmt.Fprintf(&b, "%d\n", binary.LittleEndian.Uint64(raw[i:]))
	}
	return b.String()
}

// assertLeftNothing requires that no mount under runtimeDir is left and that the directory,
// where blockfs.Mount keeps its mountpoints and lock files, is empty.
func assertLeftNothing(t *testing.T, runtimeDir string) {
	t.Helper()
	mounts, err := os.ReadFile("/proc/mounts")
	require.NoError(t, err)
	assert.NotContains(t, string(mounts), runtimeDir, "nothing left mounted")
	left, err := os.ReadDir(runtimeDir)
	require.NoError(t, err)
	assert.Empty(t, left, "no mountpoints or lock files left")
}

// runtimeDir returns a directory for $BLOCKFS_RUNTIME_DIR: private (0700), as blockfs.Mount
// requires of the place it keeps its lock files (t.TempDir's are 0755).
func runtimeDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	require.NoError(t, os.Chmod(d, 0o700))
	return d
}

// kill SIGKILLs the daemon and waits until it is gone; its mount stays, stale. A daemon that
// has not died 30 s later is stuck in the kernel (a thread in an uninterruptible wait, such as
// one on its own mount): the test fails with each thread's kernel state, and the mount's FUSE
// connection is aborted so that the process, and the tests after it, can go on.
func (m *mounted) kill() {
	t := m.t
	t.Helper()
	require.NoError(t, m.cmd.Process.Kill())
	select {
	case <-m.exited:
		return
	case <-time.After(30 * time.Second):
	}
	t.Errorf("blockfs mount still exiting 30 s after SIGKILL; its threads:\n%s", kernelStates(m.cmd.Process.Pid))
	abortFUSE(t, m.dir)
	select {
	case <-m.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("blockfs mount still not gone 30 s after its FUSE connection was aborted")
	}
}

// kernelStates returns, for each thread of pid, its state, where it waits in the kernel and
// its kernel stack (root only).
func kernelStates(pid int) string {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	var b strings.Builder
	for _, task := range tasks {
		stat, _ := os.ReadFile(filepath.Join(task, "stat"))
		wchan, _ := os.ReadFile(filepath.Join(task, "wchan"))
		stack, _ := os.ReadFile(filepath.Join(task, "stack"))
		state := "?"
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) {
			state = string(stat[i+2])
		}
		fmt.Fprintf(&b, "%s %s wchan=%s\n%s", filepath.Base(task), state, wchan, stack)
	}
	return b.String()
}

// abortFUSE aborts the FUSE connection mounted at dir (fusectl's abort file), mounting fusectl
// where it is not. The connection is found from /proc/self/mountinfo: nothing touches the
// mount itself, which may not answer.
func abortFUSE(t *testing.T, dir string) {
	m, _ := mountEntry(dir)
	_, minor, ok := strings.Cut(m.Dev, ":")
	if !ok {
		t.Logf("%s is not mounted: no connection to abort", dir)
		return
	}
	const conns = "/sys/fs/fuse/connections"
	if _, err := os.Stat(filepath.Join(conns, minor)); err != nil {
		_ = syscall.Mount("fusectl", conns, "fusectl", 0, "")
	}
	if err := os.WriteFile(filepath.Join(conns, minor, "abort"), []byte("1"), 0); err != nil {
		t.Logf("cannot abort the FUSE connection of %s: %v", dir, err)
	}
}
