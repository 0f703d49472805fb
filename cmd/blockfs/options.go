package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/mount"
)

// The command line's flags are the mount schema's options (mount.Schema): one flag each,
// registered here from the schema, recording the text given by name; mount.Decode parses and
// checks the values.

// optionFlag is a flag of one option: Set records the text in vals, parsed later.
type optionFlag struct {
	opt  mount.Option
	vals mount.Values
}

func (f optionFlag) String() string {
	if v, ok := f.vals[f.opt.Name]; ok {
		return v
	}
	return f.opt.Default
}

func (f optionFlag) Set(s string) error { f.vals[f.opt.Name] = s; return nil }
func (f optionFlag) Type() string       { return string(f.opt.Type) }

// registerOptions registers on fl a flag for each option of the groups (all options when none
// is named), recording what is given in vals.
func registerOptions(fl *pflag.FlagSet, vals mount.Values, groups ...mount.Group) {
	for _, opt := range mount.Schema() {
		if len(groups) > 0 && !slices.Contains(groups, opt.Group) {
			continue
		}
		f := fl.VarPF(optionFlag{opt: opt, vals: vals}, opt.Name, "", opt.Help)
		f.DefValue = opt.Default
		if opt.Type == mount.Bool {
			f.NoOptDefVal = "true"
		}
		if opt.Hidden {
			f.Hidden = true
		}
	}
}

// optionDoc is one option as `blockfs options --json` publishes it.
type optionDoc struct {
	Name    string   `json:"name"`
	Key     string   `json:"key"`
	Type    string   `json:"type"`
	Default string   `json:"default"`
	Scope   string   `json:"scope"`
	Group   string   `json:"group"`
	Help    string   `json:"help"`
	Choices []string `json:"choices,omitempty"`
	Hidden  bool     `json:"hidden,omitempty"`
}

func newOptions() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "options [--json]",
		Short: "List a mount's options: name, type, default, scope (the schema clients check against)",
		Long: `options lists every option of blockfs mount, declared once in the mount package: its
flag's name, its key (the same with _ for -: a mixture source's "options" and Python's
blockfs.Mount keywords), its type, default and scope: "mount" (the whole mount's), "source"
(a dataset's: a mixture's source may give its own) or "process" (how the command runs).
--json prints {"options": [...]} for programs.`,
		Args: exactArgs(),
		RunE: func(c *cobra.Command, args []string) error { return printOptions(asJSON) },
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the schema as JSON")
	return c
}

func printOptions(asJSON bool) error {
	var docs []optionDoc
	for _, opt := range mount.Schema() {
		docs = append(docs, optionDoc{Name: opt.Name, Key: opt.Key(), Type: string(opt.Type), Default: opt.Default,
			Scope: string(opt.Scope), Group: string(opt.Group), Help: opt.Help, Choices: opt.Choices, Hidden: opt.Hidden})
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string][]optionDoc{"options": docs})
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "OPTION\tTYPE\tDEFAULT\tSCOPE")
	for _, d := range docs {
		if !d.Hidden {
			fmt.Fprintf(w, "--%s\t%s\t%s\t%s\n", d.Name, d.Type, d.Default, d.Scope)
		}
	}
	return w.Flush()
}

// valuesOf returns the options given on fl (the flags changed that name an option).
func valuesOf(fl *pflag.FlagSet) mount.Values {
	vals := mount.Values{}
	fl.Visit(func(f *pflag.Flag) {
		if _, ok := mount.LookupOption(f.Name); ok {
			vals[f.Name] = f.Value.String()
		}
	})
	return vals
}
