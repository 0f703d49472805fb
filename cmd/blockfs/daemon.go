package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/blockfs/blockfs/mount/daemon"
)

// readyFDEnv names the file descriptor on which a --daemon child reports readiness (3, or 4
// when the mount point is /dev/fd/3): it writes "ok\n", or one line of error, then closes it.
const readyFDEnv = "BLOCKFS_READY_FD"

// startDaemon re-executes this command in a new session with a pipe for readiness, waits
// until the child has mounted (or failed), and returns. The child keeps running. keep, when
// not -1, is a descriptor the child must have under the same number: the /dev/fuse of a
// mount point /dev/fd/N.
func startDaemon(logFile string, keep int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(exe, os.Args[1:]...)
	var ready int
	cmd.ExtraFiles, ready = childFiles(w, keep)
	cmd.Env = append(os.Environ(), readyFDEnv+"="+strconv.Itoa(ready))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("cannot start the daemon: %w", err)
	}
	w.Close()
	done := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		done <- strings.TrimSpace(line)
	}()
	select {
	case line := <-done:
		if line == "ok" {
			_ = cmd.Process.Release()
			return nil
		}
		_ = cmd.Wait()
		if line == "" {
			line = "the daemon exited before the mount was ready"
			if logFile != "" {
				line += " (see " + logFile + ")"
			} else {
				line += " (see " + daemon.DaemonLogOf(cmd.Process.Pid) + ", if it got as far as making it)"
			}
		}
		return errors.New(strings.TrimPrefix(line, "blockfs: "))
	case <-time.After(waitReady):
		_ = cmd.Process.Kill()
		return fmt.Errorf("the daemon did not report ready within %v", waitReady)
	}
}

// childFiles returns the daemon's descriptors from 3 up (exec.Cmd.ExtraFiles) and the number
// the readiness pipe w gets: 3, or 4 when keep is 3. Descriptor keep (when 3 or above) keeps
// its number; the others in between are closed.
func childFiles(w *os.File, keep int) ([]*os.File, int) {
	if keep < 3 {
		return []*os.File{w}, 3
	}
	files := make([]*os.File, max(keep-2, 2))
	files[keep-3] = os.NewFile(uintptr(keep), fmt.Sprintf("/dev/fd/%d", keep))
	ready := 3
	if keep == 3 {
		ready = 4
	}
	files[ready-3] = w
	return files, ready
}

// signalReady tells a waiting parent that the mount is ready. No-op in the foreground.
func signalReady() { reportToParent("ok") }

// reportToParent writes one line to the readiness pipe, if there is one, and closes it.
func reportToParent(line string) {
	fd, err := strconv.Atoi(os.Getenv(readyFDEnv))
	if err != nil || fd < 3 {
		return
	}
	f := os.NewFile(uintptr(fd), "ready")
	if f == nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
	os.Unsetenv(readyFDEnv)
}
