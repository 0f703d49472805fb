package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/blockfs/blockfs/mount/daemon"
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
			if !daemon.IsMountpoint(mnt) {
				return fmt.Errorf("%s is not mounted", args[0])
			}
			if err := daemon.Unmount(mnt, lazy); err != nil {
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
