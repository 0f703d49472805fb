package test

import (
	"bytes"
	"errors"
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

	"github.com/blockfs/blockfs/internal/dstest"
	"github.com/blockfs/blockfs/shuffle"
)

// TestDevFdMount is go-fuse's /dev/fd/N mode as a container manager uses it: a privileged
// parent (the test, as root) opens /dev/fuse and calls mount(2) on a directory, then starts
// blockfs as nobody with the descriptor as /dev/fd/3 (docs/USAGE.md's recipe). blockfs serves
// without root or fusermount3 the same bytes a normal mount does; the parent unmounts, and
// blockfs exits; on SIGTERM blockfs exits at once and the parent unmounts what is left.
func TestDevFdMount(t *testing.T) {
	requireFUSE(t)
	requireRoot(t, "to open /dev/fuse and mount(2) it as a privileged parent does")
	p := packForAll(t)
	parent := dirForAll(t)
	exe := binaryForAll(t, parent)
	d := dstest.FromDir(t, p.dir, p.records)
	n := uint64(len(p.records))
	wantData, wantIDs, _ := d.Epoch(shuffle.Options{Seed: 7, Epoch: 3, Mode: shuffle.Full, Mix: 1}, 0, n)
	lo, hi := dstest.Shard(n, 1, 2)
	shardData, _, _ := d.Epoch(shuffle.Options{Seed: 7, Epoch: 0, Mode: shuffle.Full, Mix: 1}, lo, hi)
	args := []string{"--seed", "7", "--cache-size", "4MiB", "--readahead", "512KiB", p.dir, "/dev/fd/3"}
	newMnt := func(name string) string {
		mnt := filepath.Join(parent, name)
		require.NoError(t, os.Mkdir(mnt, 0o755))
		return mnt
	}

	t.Run("unmounted by the parent", func(t *testing.T) {
		mnt := newMnt("fg")
		s := startDevFd(t, exe, mnt, nobody, args...)
		start := time.Now()
		s.waitServing()
		t.Logf("serving %v after start", time.Since(start))
		got, err := os.ReadFile(filepath.Join(mnt, "epoch-0003"))
		require.NoError(t, err)
		require.Equal(t, sum(wantData), sum(got), "epoch-0003 through the /dev/fd mount")
		ids, err := os.ReadFile(filepath.Join(mnt, "epoch-0003.ids"))
		require.NoError(t, err)
		require.Equal(t, wantIDs, ids)
		got, err = os.ReadFile(filepath.Join(mnt, "shard-1-of-2", "epoch-0000"))
		require.NoError(t, err)
		require.Equal(t, sum(shardData), sum(got), "shard-1-of-2/epoch-0000")
		st, err := os.Stat(filepath.Join(mnt, "epoch-0003"))
		require.NoError(t, err)
		assert.EqualValues(t, nobody, st.Sys().(*syscall.Stat_t).Uid, "served by nobody")
		// A client given the real mount point reads the mount's facts as from any other.
		assert.Equal(t, idsText(t, filepath.Join(mnt, "epoch-0003.ids")), mustRun(t, "order", "--epoch", "3", "--ids", mnt))
		s.unmount()
		s.requireExit(10*time.Second, "the mount served on /dev/fd/3 was unmounted")
	})

	t.Run("SIGTERM", func(t *testing.T) {
		mnt := newMnt("term")
		s := startDevFd(t, exe, mnt, nobody, args...)
		s.waitServing()
		f, err := os.Open(filepath.Join(mnt, "epoch-0000"))
		require.NoError(t, err)
		defer f.Close()
		_, err = f.Read(make([]byte, 4096))
		require.NoError(t, err)
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
		s.requireExit(5*time.Second, "terminated: closing /dev/fd/3 and exiting")
		// The connection ended with blockfs: a reader gets an error, not a hang, and the
		// mount stays until the parent unmounts it.
		_, err = os.ReadFile(filepath.Join(mnt, "epoch-0001"))
		assert.ErrorIs(t, err, syscall.ENOTCONN)
		assert.True(t, isMounted(mnt), "the parent's mount stays until the parent unmounts it")
		f.Close()
		s.unmount()
	})

	t.Run("--daemon", func(t *testing.T) {
		// The daemon's readiness pipe goes to descriptor 4: /dev/fd/3 stays the connection.
		mnt := newMnt("daemon")
		s := startDevFd(t, exe, mnt, nobody, append([]string{"--daemon"}, args...)...)
		require.NoError(t, <-s.exited, "blockfs mount --daemon: %s", s.stderr.String())
		pids := processesOf(exe)
		require.Len(t, pids, 1, "one daemon serving")
		got, err := os.ReadFile(filepath.Join(mnt, "epoch-0003"))
		require.NoError(t, err)
		require.Equal(t, sum(wantData), sum(got), "epoch-0003 through the daemon's /dev/fd mount")
		s.unmount()
		deadline := time.Now().Add(10 * time.Second)
		for len(processesOf(exe)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		assert.Empty(t, processesOf(exe), "the daemon exits once the parent unmounts")
	})

	t.Run("served by root", func(t *testing.T) {
		// As root, go-fuse would mount by itself (DirectMount), over where /dev/fd/3
		// leads: blockfs must serve the descriptor instead.
		mnt := newMnt("root")
		s := startDevFd(t, exe, mnt, 0, args...)
		s.waitServing()
		got, err := os.ReadFile(filepath.Join(mnt, "epoch-0003"))
		require.NoError(t, err)
		require.Equal(t, sum(wantData), sum(got))
		assert.False(t, isMounted("/dev/fuse"), "nothing mounted over /dev/fuse")
		s.unmount()
		s.requireExit(10*time.Second, "the mount served on /dev/fd/3 was unmounted")
	})

	t.Run("options the parent decides", func(t *testing.T) {
		mnt := newMnt("opts")
		dev := mountFuse(t, mnt, 0)
		defer dev.Close()
		for _, c := range []struct{ flag, msg string }{
			{"--allow-other", "--allow-other: the process that mounted /dev/fd/3 chose who may read it"},
			{"--users-lock=" + filepath.Join(parent, "users.lock"), "--users-lock: blockfs cannot unmount /dev/fd/3"},
		} {
			var errb bytes.Buffer
			cmd := exec.Command(exe, "mount", c.flag, p.dir, "/dev/fd/3")
			cmd.Stderr, cmd.ExtraFiles = &errb, []*os.File{dev}
			err := cmd.Run()
			assert.Equal(t, 2, cmd.ProcessState.ExitCode(), "%s: %v: %s", c.flag, err, errb.String())
			assert.Equal(t, 1, strings.Count(errb.String(), "\n"), "one line: %s", errb.String())
			assert.Contains(t, errb.String(), c.msg)
		}
		require.NoError(t, syscall.Unmount(mnt, 0))
	})
}

// TestDevFdRefusals: a mount point /dev/fd/N that does not name a mounted /dev/fuse is one
// line, before go-fuse starts.
func TestDevFdRefusals(t *testing.T) {
	p := packRaw(t, 20, "64KiB")
	file, err := os.Create(filepath.Join(t.TempDir(), "file"))
	require.NoError(t, err)
	defer file.Close()
	type devfdCase struct {
		name  string
		mnt   string
		extra *os.File // passed as descriptor 3
		msg   string
	}
	cases := []devfdCase{
		{"not open", "/dev/fd/99", nil, "mount point /dev/fd/99: descriptor 99 is not open"},
		{"a regular file", "/dev/fd/3", file, "mount point /dev/fd/3: descriptor 3 is not /dev/fuse but a regular file"},
		{"standard output", "/dev/fd/1", nil, "mount point /dev/fd/1 is standard output or error"},
	}
	// /dev/fuse itself where this user may open it (root, or a machine where it is 0666).
	if dev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err == nil {
		defer dev.Close()
		cases = append(cases, devfdCase{"/dev/fuse not mounted", "/dev/fd/3", dev, "descriptor 3 is /dev/fuse but nothing is mounted on it"})
	}
	if dev, err := os.OpenFile("/dev/fuse", os.O_RDONLY, 0); err == nil {
		defer dev.Close()
		cases = append(cases, devfdCase{"/dev/fuse read-only", "/dev/fd/3", dev, "descriptor 3 is /dev/fuse open for only reading or writing"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var errb bytes.Buffer
			cmd := exec.Command(bin, "mount", "--cache-size", "4MiB", "--readahead", "512KiB", p.dir, c.mnt)
			cmd.Stderr = &errb
			if c.extra != nil {
				cmd.ExtraFiles = []*os.File{c.extra}
			}
			err := cmd.Run()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "blockfs mount %s: %v: %s", c.mnt, err, errb.String())
			assert.Equal(t, 1, ee.ExitCode())
			assert.Equal(t, 1, strings.Count(errb.String(), "\n"), "one line: %s", errb.String())
			assert.Contains(t, errb.String(), c.msg)
		})
	}
}

// devfd is blockfs serving, as nobody or root, a /dev/fuse that the test mounted as root.
type devfd struct {
	t      *testing.T
	mnt    string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan error
}

// mountFuse does what a privileged parent does first: it opens /dev/fuse and mounts it on mnt
// with mount(2), with the options go-fuse's own direct mount passes (read-only, nosuid, nodev,
// default_permissions), owned by uid and open to other users so that the test, as root, can
// read a mount that nobody serves. A cleanup unmounts whatever is left, and fails the test if
// anything was. The caller closes the descriptor.
func mountFuse(t *testing.T, mnt string, uid int) *os.File {
	t.Helper()
	dev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	require.NoError(t, err)
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d,max_read=1048576,default_permissions,allow_other", dev.Fd(), uid, uid)
	if err := syscall.Mount("blockfs", mnt, "fuse.blockfs", syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, data); err != nil {
		dev.Close()
		t.Fatalf("mount(2) of /dev/fuse on %s: %v", mnt, err)
	}
	t.Cleanup(func() {
		if isMounted(mnt) {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
			t.Errorf("%s was left mounted", mnt)
		}
	})
	return dev
}

// startDevFd mounts /dev/fuse on mnt for uid (mountFuse) and starts `exe mount ARGS` as uid
// (root or nobody) with the descriptor as 3; it then closes its own copy, so that the
// connection ends when blockfs does. A cleanup kills any blockfs left running, and fails the
// test if one was.
func startDevFd(t *testing.T, exe, mnt string, uid int, args ...string) *devfd {
	t.Helper()
	dev := mountFuse(t, mnt, uid)
	defer dev.Close()
	t.Cleanup(func() {
		for _, pid := range processesOf(exe) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("blockfs (pid %d) was left running", pid)
		}
	})
	s := &devfd{t: t, mnt: mnt, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	s.cmd = exec.Command(exe, append([]string{"mount"}, args...)...)
	if uid == nobody {
		s.cmd = asNobody(exe, append([]string{"mount"}, args...)...)
	}
	s.cmd.Stderr = s.stderr
	s.cmd.ExtraFiles = []*os.File{dev}
	require.NoError(t, s.cmd.Start())
	go func() { s.exited <- s.cmd.Wait() }()
	return s
}

// waitServing waits until blockfs answers on the mount: until then a lookup waits in the
// kernel, so it runs aside, and blockfs exiting first ends it with ENOTCONN.
func (s *devfd) waitServing() {
	t := s.t
	t.Helper()
	read := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(filepath.Join(s.mnt, ".blockfs", "info.json"))
		read <- err
	}()
	select {
	case err := <-read:
		require.NoError(t, err, "reading the mount's info.json: %s", s.stderr.String())
	case err := <-s.exited:
		t.Fatalf("blockfs exited before serving (%v): %s", err, s.stderr.String())
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Fatalf("the mount did not serve within 20s: %s", s.stderr.String())
	}
}

// unmount unmounts as the parent does, retrying while the kernel still counts files as open.
func (s *devfd) unmount() {
	s.t.Helper()
	var err error
	for try := 0; try < 50; try++ {
		if err = syscall.Unmount(s.mnt, 0); err != syscall.EBUSY {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(s.t, err, "unmounting %s", s.mnt)
	assert.False(s.t, isMounted(s.mnt), "nothing left mounted")
}

// requireExit requires blockfs to exit 0 within limit, having logged msg.
func (s *devfd) requireExit(limit time.Duration, msg string) {
	t := s.t
	t.Helper()
	select {
	case err := <-s.exited:
		require.NoError(t, err, "blockfs exit: %s", s.stderr.String())
	case <-time.After(limit):
		_ = s.cmd.Process.Kill()
		t.Fatalf("blockfs still running %v later: %s", limit, s.stderr.String())
	}
	assert.Contains(t, s.stderr.String(), msg)
}

// processesOf returns the pids of the running processes whose executable is exe.
func processesOf(exe string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if p, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && p == exe {
			pids = append(pids, pid)
		}
	}
	return pids
}
