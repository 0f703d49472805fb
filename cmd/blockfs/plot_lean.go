//go:build !tables

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/blockfs/blockfs/pack"
	"github.com/blockfs/blockfs/shuffle"
)

// This build does not link gonum/plot, whose packages take megabytes of resident memory in
// any process that links them (the mount's daemon is this binary): order --stats --plot runs
// in blockfs-tables, which links it (as it links arrow-go for pack).

// checkPlotPath hands the whole order command to blockfs-tables, which draws the plot, and
// exits with its status.
func checkPlotPath(string) error {
	if os.Getenv(plotChild) != "" {
		return fmt.Errorf("--plot: %s does not draw plots (it is a blockfs without gonum/plot); make build makes the one that does", pack.TablesBinary)
	}
	bin, err := pack.FindTables()
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	cmd := exec.Command(bin, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), plotChild+"=1") // a blockfs-tables that is this build again must not run itself
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		return fmt.Errorf("--plot: cannot run %s: %w", bin, err)
	}
	os.Exit(0)
	return nil
}

// plotChild marks the blockfs-tables run for a plot.
const plotChild = "BLOCKFS_PLOT_CHILD"

// plotOrder is never reached in this build: checkPlotPath ran blockfs-tables.
func plotOrder(path, title string, cur, next, uni, uni2 shuffle.Sample, labels []int32) error {
	return errors.New("--plot is drawn by blockfs-tables")
}

// plotMixture is never reached in this build: checkPlotPath ran blockfs-tables.
func plotMixture(path, title string, ours, uniform []float64) error {
	return errors.New("--plot is drawn by blockfs-tables")
}
