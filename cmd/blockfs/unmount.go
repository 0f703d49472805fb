package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func newUnmount() *cobra.Command {
	var lazy bool
	c := &cobra.Command{
		Use:   "unmount [--lazy] MOUNTPOINT",
		Short: "Unmount a blockfs mount (also clears a stale one left by a killed daemon)",
		Args:  exactArgs("MOUNTPOINT"),
		RunE: func(c *cobra.Command, args []string) error {
			mnt, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			if !isMountpoint(mnt) {
				return fmt.Errorf("%s is not mounted", args[0])
			}
			if err := unmount(mnt, lazy); err != nil {
				if lazy {
					return err
				}
				return fmt.Errorf("%v (files still open? close them, or use --lazy to detach now)", err)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&lazy, "lazy", false, "detach now even if files are open (they are released when closed)")
	return c
}

// unmount unmounts mnt: directly as root, else through fusermount3 (or fusermount).
func unmount(mnt string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = syscall.MNT_DETACH
		}
		if err := syscall.Unmount(mnt, flags); err != nil {
			return fmt.Errorf("cannot unmount %s: %v", mnt, err)
		}
		return nil
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	for _, bin := range []string{"fusermount3", "fusermount"} {
		path, err := exec.LookPath(bin)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, append(args, mnt)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("cannot unmount %s: %s", mnt, strings.TrimSpace(string(out)))
		}
		return nil
	}
	return fmt.Errorf("cannot unmount %s: fusermount3 not found (install fuse3)", mnt)
}

// detach lazily unmounts mnt.
func detach(mnt string) error { return unmount(mnt, true) }
