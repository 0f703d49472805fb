package test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHungMountCommands: one daemon that does not answer (SIGSTOP here; hung or deadlocked
// alike) must not stop the node's other blockfs commands. Every command that reads a mount's
// files (stats, stats --once, info, order --ids) gives up on it within its bound (5 s) with
// one line naming it and its stopped daemon, and exits at once on Ctrl-C or SIGTERM; and new
// mounts of other datasets come up meanwhile without a thread waiting on the stopped daemon
// (they learn its memory claim from the registry, not from its info.json). Before, each
// command hung until the daemon was continued, deaf to Ctrl-C, and every new mount left a
// thread waiting in the kernel on the stopped one, where the next mount's look-up of the same
// name waited unkillably behind it. A mount onto its mountpoint is refused at once, as onto
// any mount point (it waited for the stopped daemon once the attribute timeout had passed).
func TestHungMountCommands(t *testing.T) {
	t.Parallel() // beside TestSoak: it mostly waits for the attribute timeout
	p := packRaw(t, 64, "64KiB")
	hung := mount(t, p.dir, "--cache-size", "4MiB", "--readahead", "0")
	pid := hung.cmd.Process.Pid
	if os.Geteuid() == 0 {
		// Written once the mount is up, before the daemon says it is ready (the test sees the
		// mount table first).
		reg := fmt.Sprintf("/run/blockfs/mounts/*-%d.json", pid) // NS-PID.json
		require.Eventually(t, func() bool { m, _ := filepath.Glob(reg); return len(m) == 1 }, 5*time.Second, 10*time.Millisecond,
			"the daemon registered its claim: %s", hung.stderr.String())
	}
	require.NotContains(t, hung.stderr.String(), "cannot record")
	require.NoError(t, hung.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	t.Cleanup(func() { _ = hung.cmd.Process.Signal(syscall.SIGCONT) }) // before its stop (cleanups run last first)

	// Other datasets mount meanwhile, and none of their threads waits on the stopped daemon.
	for i, bs := range []string{"128KiB", "256KiB", "128KiB"} {
		other := packRaw(t, 64, bs)
		m := mountWithin(t, 20*time.Second, other.dir, "--cache-size", "4MiB", "--readahead", "0")
		got, err := os.ReadFile(m.path("epoch-0000"))
		require.NoError(t, err)
		assert.Len(t, got, 64*recordSize)
		assert.Empty(t, fuseWaits(t, m.cmd.Process.Pid), "mount %d: threads waiting on a FUSE request", i)
	}

	want := hung.dir + " does not answer: its daemon (pid " + fmt.Sprint(pid) + "), which is stopped,"
	for _, args := range [][]string{{"stats", "--once", hung.dir}, {"stats", hung.dir}, {"info", hung.dir}, {"order", "--ids", hung.dir}} {
		_, errs, code, took := runWithin(t, 15*time.Second, args...)
		t.Logf("%v: exit %d after %v", args, code, took.Round(time.Millisecond))
		assert.Equal(t, 1, code, "%v: %s", args, errs)
		assert.Less(t, took, 10*time.Second, args)
		oneLine(t, errs, want, args)
		assert.Contains(t, errs, fmt.Sprintf("kill -CONT %d", pid), args)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, args := range [][]string{{"stats", hung.dir}, {"info", hung.dir}, {"order", "--ids", hung.dir}} {
			took := signalled(t, sig, args...)
			t.Logf("%v: ended %v after %v", args, sig, took.Round(time.Millisecond))
			assert.Less(t, took, 2*time.Second, "%v answers %v at once", args, sig)
		}
	}

	// A mount onto its mountpoint is refused from the mount table, without a stat of it: once
	// the kernel's cached attributes of its root have expired (the attribute timeout, a
	// minute), that stat would wait for the stopped daemon.
	if wait := time.Until(stopped.Add(time.Minute + 2*time.Second)); wait > 0 {
		t.Logf("waiting %v for the attribute timeout", wait.Round(time.Second))
		time.Sleep(wait)
	}
	again := packRaw(t, 64, "128KiB")
	_, errs, code, took := runWithin(t, 20*time.Second, "mount", "--cache-size", "4MiB", "--readahead", "0", again.dir, hung.dir)
	t.Logf("mount onto it: exit %d after %v", code, took.Round(time.Millisecond))
	assert.NotZero(t, code, errs)
	assert.Less(t, took, 5*time.Second)
	oneLine(t, errs, hung.dir+" is already a mount point (unmount it first: blockfs unmount "+hung.dir+")")

	// Continued, it answers again.
	require.NoError(t, hung.cmd.Process.Signal(syscall.SIGCONT))
	out, errs, code, _ := runWithin(t, 15*time.Second, "stats", "--once", "--interval", "200ms", hung.dir)
	assert.Zero(t, code, errs)
	assert.Contains(t, out, `"readers"`)
}

// signalled starts blockfs args, sends it sig a second later and returns how long it took to
// end after that (it is killed, and the test fails, past 10 s).
func signalled(t *testing.T, sig syscall.Signal, args ...string) time.Duration {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(time.Second)
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(sig))
	select {
	case <-done:
		return time.Since(start)
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("blockfs %v still running 10 s after %v: %s", args, sig, errb.String())
		return time.Since(start)
	}
}

// fuseWaits returns the threads of process pid that wait for a FUSE daemon's answer, each as
// "TID STATE: kernel stack".
func fuseWaits(t *testing.T, pid int) []string {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	require.NoError(t, err)
	var out []string
	for _, task := range tasks {
		wchan, _ := os.ReadFile(task + "/wchan")
		stack, _ := os.ReadFile(task + "/stack") // root only; wchan says enough elsewhere
		if w := string(wchan); w == "request_wait_answer" || w == "d_wait_lookup" || strings.Contains(string(stack), "fuse_simple_request") {
			st, _ := os.ReadFile(task + "/stat")
			out = append(out, fmt.Sprintf("%s %s: %s", filepath.Base(task), w, strings.Join(strings.Fields(string(st))[2:3], "")+" "+string(stack)))
		}
	}
	return out
}
