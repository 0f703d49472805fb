package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// readyFDEnv names the file descriptor on which a --daemon child reports readiness: it
// writes "ok\n", or one line of error, then closes it.
const readyFDEnv = "BLOCKFS_READY_FD"

// startDaemon re-executes this command in a new session with a pipe for readiness, waits
// until the child has mounted (or failed), and returns. The child keeps running.
func startDaemon(logFile string) error {
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
	cmd.Env = append(os.Environ(), readyFDEnv+"=3")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.ExtraFiles = []*os.File{w}
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
			}
		}
		return errors.New(strings.TrimPrefix(line, "blockfs: "))
	case <-time.After(waitReady):
		_ = cmd.Process.Kill()
		return fmt.Errorf("the daemon did not report ready within %v", waitReady)
	}
}

// signalReady tells a waiting parent that the mount is ready. No-op in the foreground.
func signalReady() { reportToParent("ok") }

// reportToParent writes one line to the readiness pipe, if there is one, and closes it.
func reportToParent(line string) {
	if os.Getenv(readyFDEnv) == "" {
		return
	}
	f := os.NewFile(3, "ready")
	if f == nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
	os.Unsetenv(readyFDEnv)
}
