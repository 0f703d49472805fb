// Command blockfs packs datasets into blocks and mounts them as block-shuffled epoch files.
//
// Exit codes: 0 success; 1 the command failed (bad dataset, I/O error, mount failure);
// 2 the command line was wrong (unknown flag, bad value, wrong number of arguments).
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	// First: refuse a file-descriptor limit too low to start, before go-fuse's init panics on it.
	_ "github.com/blockfs/blockfs/internal/fdlimit"
	"github.com/blockfs/blockfs/internal/near"
	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/mount"
)

// usageError marks command-line mistakes (exit code 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func main() {
	root := newRoot()
	err := root.Execute()
	if err == nil {
		return
	}
	// One line, whatever a library put in its message.
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintf(os.Stderr, "blockfs: %s\n", msg)
	reportToParent(msg)
	os.Exit(exitCode(err))
}

// exitCode is the exit status of a command that failed with err: 2 for a mistake in the
// command line (a usageError, or a library's error wrapping mount.ErrUsage or naming an
// option), else 1.
func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, mount.ErrUsage) || optname.Of(err) != "" {
		return 2
	}
	return 1
}

// version is set at build time with -ldflags "-X main.version=..." (the wheel's; -X needs a
// constant here); a build from a checkout says which commit (versionOf, for --version).
var version = "dev"

// readBuildInfo is debug.ReadBuildInfo (a variable for tests).
var readBuildInfo = debug.ReadBuildInfo

// versionOf returns v, and for "dev" the commit Go recorded in the binary, its date and
// whether the tree had changes: "dev (git 2252ff6d2c1b, 2026-11-28T21:03:11Z, modified)".
func versionOf(v string, info func() (*debug.BuildInfo, bool)) string {
	bi, ok := info()
	if v != "dev" || !ok {
		return v
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" {
		return v
	}
	return fmt.Sprintf("%s (git %s, %s%s)", v, rev, at, modified)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "blockfs",
		Short: "Serve block datasets as block-shuffled epoch files over FUSE",
		Long: `blockfs stores samples in large block files and mounts them read-only as one file per
epoch whose bytes are every record in a block-shuffled order, so any reader gets large
sequential disk reads and a near-random order with plain file I/O.`,
		Version:       versionOf(version, readBuildInfo),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v%s (see '%s --help')", err, flagHint(c, err), c.CommandPath())
	})
	root.AddCommand(newPack(), newMount(), newUnmount(), newInfo(), newVerify(), newIndex(), newOrder(), newStats(), newReadSamples(), newOptions())
	root.CompletionOptions.DisableDefaultCmd = true
	return root
}

// flagHint returns "; did you mean --seed?" for an unknown flag (pflag's "unknown flag:
// --seeds") near one of c's, else "".
func flagHint(c *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if best := near.Best(name, names, 2); best != "" {
		return "; did you mean --" + best + "?"
	}
	return ""
}

// exactArgs is cobra.ExactArgs with a message that names the arguments and exits 2.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != len(names) {
			hint := ""
			if len(args) > len(names) {
				// The shell expands an unquoted glob into many arguments before blockfs sees it.
				hint = fmt.Sprintf("; an unquoted glob? quote it so that blockfs expands it: %s '%s/*%s' ...", c.Name(), filepath.Dir(args[0]), filepath.Ext(args[0]))
			}
			return usagef("%s takes %d arguments (%v), got %d%s (see '%s --help')", c.Name(), len(names), names, len(args), hint, c.CommandPath())
		}
		return nil
	}
}
