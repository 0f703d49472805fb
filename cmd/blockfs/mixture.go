package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/blockfs/blockfs/internal/strictjson"
	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/shuffle"
	"github.com/blockfs/blockfs/source/s3"
)

// A mixture file (docs/SHUFFLE.md, "Mixtures") names its sources' mount flags in "options",
// with _ for -: each source's options are parsed by the flags of blockfs mount itself, so a
// source takes exactly what mount takes, in the same units, with the same checks.

// sourceFlags are the flags a source's "options" may give; every other flag of mount is the
// whole mount's, given once on the command line. The command line's own shuffle, mix,
// verify, object store and disk cache flags are every source's defaults.
var sourceFlags = []string{"record-size", "block-size", "offset", "records", "dtype", "shape", "window", "stride", "segments",
	"shuffle", "mix", "seed", "verify", "endpoint", "s3-concurrency", "s3-part-size", "s3-timeout", "s3-stall-timeout", "s3-retries",
	"disk-cache", "disk-cache-size"}

// pathFlags are the source flags that name a file or directory: relative to the mixture file's
// directory when given in its options.
var pathFlags = []string{"segments", "disk-cache"}

// inPlaceFlagNames are the source flags a mixture refuses on the command line.
var inPlaceFlagNames = []string{"record-size", "block-size", "offset", "records", "dtype", "shape", "window", "stride", "segments"}

// maxMixtureBytes bounds a mixture file.
const maxMixtureBytes = 4 << 20

type mixtureDoc struct {
	EpochRecords json.Number `json:"epoch_records"`
	Sources      []sourceDoc `json:"sources"`
}

type sourceDoc struct {
	Data    string                     `json:"data"`
	Name    string                     `json:"name"`
	Weight  json.RawMessage            `json:"weight"`
	Repeat  json.RawMessage            `json:"repeat"`
	Records json.RawMessage            `json:"records"`
	Options map[string]json.RawMessage `json:"options"`
}

// mixtureOptions reads the mixture file path and returns the mount's Mixture: each source's
// options parsed as mount's flags, over the command line's defaults (fl).
func mixtureOptions(fl *pflag.FlagSet, path, mnt string) (*mount.Mixture, error) {
	for _, name := range inPlaceFlagNames {
		if fl.Changed(name) {
			return nil, usagef("--%s is a source's flag: %s is a mixture, so give it in that source's \"options\" (%q)", name, path, strings.ReplaceAll(name, "-", "_"))
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, usagef("%s: %v", path, err)
	}
	raw, err := userfile.ReadFile(abs, maxMixtureBytes)
	if err != nil {
		return nil, usagef("cannot read the mixture %s: %v", path, err)
	}
	var doc mixtureDoc
	if err := strictjson.DecodeKnown(raw, &doc); err != nil {
		return nil, mixtureSyntax(path, err)
	}
	mix := &mount.Mixture{Name: path, File: abs}
	if doc.EpochRecords != "" {
		n, err := parseCount(doc.EpochRecords.String())
		if err != nil || n == 0 {
			return nil, usagef("%s: epoch_records %s must be a positive whole number", path, doc.EpochRecords)
		}
		mix.EpochRecords = n
	}
	if len(doc.Sources) == 0 {
		return nil, usagef("%s has no sources: give \"sources\": [{\"data\": DATA, \"weight\": W}, ...]", path)
	}
	if len(doc.Sources) > shuffle.MaxSources {
		return nil, usagef("%s has %d sources; at most %d", path, len(doc.Sources), shuffle.MaxSources)
	}
	for i, sd := range doc.Sources {
		src, err := sourceOptions(fl, sd, filepath.Dir(abs), mnt)
		if err != nil {
			name := sd.Name
			if name == "" {
				name = sd.Data
			}
			return nil, usagef("%s: source %d (%s): %v", path, i, name, err)
		}
		mix.Sources = append(mix.Sources, src)
	}
	return mix, nil
}

// mixtureSyntax is the error for a mixture file that strictjson refuses: a key given twice or
// data after the object (which encoding/json alone would take silently: the last of two
// "sources", say), or JSON that is invalid or not a mixture's.
func mixtureSyntax(path string, err error) error {
	var se *strictjson.Error
	switch {
	case !errors.As(err, &se):
		return usagef("%s is not a mixture file: %v (want {\"epoch_records\": N, \"sources\": [{\"data\": DATA, \"weight\": W, \"options\": {...}}, ...]}; docs/SHUFFLE.md)", path, err)
	case se.Kind == strictjson.Duplicate:
		return usagef("%s has %v: give each key once (a mixture file is read strictly, as a dataset's manifest)", path, se)
	default:
		return usagef("%s has %v: a mixture file is one JSON object; remove what follows it (or merge its sources into the first)", path, se)
	}
}

// sourceOptions turns one source of a mixture file into its mount options.
func sourceOptions(fl *pflag.FlagSet, sd sourceDoc, dir, mnt string) (mount.Source, error) {
	var src mount.Source
	if sd.Data == "" {
		return src, fmt.Errorf("no \"data\": name the dataset (a directory, a file, s3://BUCKET/PREFIX)")
	}
	data := sd.Data
	if !s3.IsURL(data) && !filepath.IsAbs(data) {
		data = filepath.Join(dir, data)
	}
	if mount.Locate(data).Kind == mount.MixtureFile {
		return src, fmt.Errorf("%s is a mixture file; a mixture's sources are datasets (list its sources here instead)", sd.Data)
	}
	src.Name = sd.Name
	if src.Name == "" {
		src.Name = sd.Data
	}
	var rules []string
	for _, r := range []struct {
		kind shuffle.RuleKind
		raw  json.RawMessage
	}{{shuffle.Weight, sd.Weight}, {shuffle.Repeat, sd.Repeat}, {shuffle.Records, sd.Records}} {
		if r.raw == nil {
			continue
		}
		rules = append(rules, r.kind.String())
		text := strings.TrimSpace(string(r.raw))
		if unq, err := jsonString(r.raw); err == nil {
			if r.kind != shuffle.Repeat {
				return src, fmt.Errorf("%s %q must be a JSON number (only repeat takes a fraction as a string, \"1/3\")", r.kind, unq)
			}
			text = unq
		}
		rule, err := shuffle.ParseRule(r.kind, text)
		if err != nil {
			return src, err
		}
		src.Rule = rule
	}
	if len(rules) != 1 {
		return src, fmt.Errorf("give exactly one of \"weight\", \"repeat\" or \"records\" (it gives %s)", orNone(rules))
	}
	args, err := optionArgs(fl, sd.Options, s3.IsURL(data), dir)
	if err != nil {
		return src, err
	}
	var sf mountFlags
	sfl := pflag.NewFlagSet("source", pflag.ContinueOnError)
	sfl.SetOutput(new(bytes.Buffer))
	sf.register(sfl)
	if err := sfl.Parse(args); err != nil {
		return src, fmt.Errorf("options: %v", err)
	}
	if src.Opt, err = sf.options(sfl, data, mnt); err != nil {
		return src, err
	}
	src.SeedGiven = sfl.Changed("seed")
	return src, nil
}

// optionArgs returns the command line of a source: the command line's own source flags (its
// defaults; the disk cache's for a source in an object store only), then the source's options
// as flags (paths relative to dir, the mixture file's).
func optionArgs(fl *pflag.FlagSet, opts map[string]json.RawMessage, remote bool, dir string) ([]string, error) {
	var args []string
	fl.Visit(func(f *pflag.Flag) {
		disk := strings.HasPrefix(f.Name, "disk-cache")
		if slices.Contains(sourceFlags, f.Name) && f.Name != "seed" && (remote || !disk) {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := strings.ReplaceAll(k, "_", "-")
		if !slices.Contains(sourceFlags, name) {
			if fl.Lookup(name) != nil {
				return nil, fmt.Errorf("option %q is a flag of the whole mount: give it once on the command line (--%s)", k, name)
			}
			known := make([]string, len(sourceFlags))
			for i, f := range sourceFlags {
				known[i] = strings.ReplaceAll(f, "-", "_")
			}
			return nil, fmt.Errorf("unknown option %q (a source takes %s)", k, strings.Join(known, ", "))
		}
		v, err := optionValue(opts[k])
		if err != nil {
			return nil, fmt.Errorf("option %q: %v", k, err)
		}
		if slices.Contains(pathFlags, name) && v != "" && !filepath.IsAbs(v) {
			v = filepath.Join(dir, v) // relative to the mixture file, as data is
		}
		args = append(args, "--"+name+"="+v)
	}
	return args, nil
}

// optionValue returns a JSON option value as a flag's text: a string as it is, a number or a
// boolean as written, a list of numbers (a shape) comma-separated.
func optionValue(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return fmt.Sprint(x), nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			n, ok := e.(json.Number)
			if !ok {
				return "", fmt.Errorf("a list must hold numbers (a shape such as [3, 32, 32])")
			}
			parts[i] = n.String()
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("want a string, a number, a boolean or a list of numbers, not %s", string(raw))
}

func jsonString(raw json.RawMessage) (string, error) {
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

func parseCount(s string) (uint64, error) {
	var n uint64
	_, err := fmt.Sscan(s, &n)
	if err == nil && fmt.Sprint(n) != s {
		err = fmt.Errorf("not a whole number")
	}
	return n, err
}

func orNone(rules []string) string {
	if len(rules) == 0 {
		return "none"
	}
	return strings.Join(rules, " and ")
}
