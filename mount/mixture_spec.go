package mount

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/internal/strictjson"
	"github.com/blockfs/blockfs/internal/userfile"
	"github.com/blockfs/blockfs/shuffle"
)

// A mixture file (docs/SHUFFLE.md, "Mixtures") gives each source's options in "options", by
// the schema's keys (cache_size form, or the flag's name): only PerSource options, decoded
// with the same parsers and checks as the command line's. The command line's own PerSource
// options are every source's defaults (its seed aside: a source's own seed is derived from
// the mixture's unless the source gives one; its disk cache options only for a source in an
// object store).

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

// ReadMixture reads the mixture file path and returns its spec: each source's options
// decoded over the command line's PerSource values (given). In-place options given on the
// command line are refused: each source has its own.
func ReadMixture(path string, given Values) (*Mixture, error) {
	for _, opt := range schema {
		if _, ok := given[opt.Name]; ok && opt.Group == GroupInPlace {
			return nil, optionErr(opt.Name, "%s is a source's flag: %s is a mixture, so give it in that source's \"options\" (%q)", flag(opt.Name), path, opt.Key())
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, Usagef("%s: %v", path, err)
	}
	raw, err := userfile.ReadFile(abs, maxMixtureFile)
	if err != nil {
		return nil, Usagef("cannot read the mixture %s: %v", path, err)
	}
	var doc mixtureDoc
	if err := strictjson.DecodeKnown(raw, &doc); err != nil {
		return nil, mixtureSyntax(path, err)
	}
	mix := &Mixture{Name: path, File: abs}
	if doc.EpochRecords != "" {
		n, err := parseWhole(doc.EpochRecords.String())
		if err != nil || n == 0 {
			return nil, Usagef("%s: epoch_records %s must be a positive whole number", path, doc.EpochRecords)
		}
		mix.EpochRecords = n
	}
	if len(doc.Sources) == 0 {
		return nil, Usagef("%s has no sources: give \"sources\": [{\"data\": DATA, \"weight\": W}, ...]", path)
	}
	if len(doc.Sources) > shuffle.MaxSources {
		return nil, Usagef("%s has %d sources; at most %d", path, len(doc.Sources), shuffle.MaxSources)
	}
	for i, sd := range doc.Sources {
		src, err := sd.source(given.In(PerSource), filepath.Dir(abs))
		if err != nil {
			name := sd.Name
			if name == "" {
				name = sd.Data
			}
			return nil, sourceErrf(path, i, name, err)
		}
		mix.Sources = append(mix.Sources, src)
	}
	return mix, nil
}

// sourceErrf is an error in source i of the mixture file path, keeping err's option.
func sourceErrf(path string, i int, name string, err error) error {
	msg := fmt.Sprintf("%s: source %d (%s): %v", path, i, name, err)
	if opt := optname.Of(err); opt != "" {
		return optionErr(opt, "%s", msg)
	}
	return Usagef("%s", msg)
}

// mixtureSyntax is the error for a mixture file that strictjson refuses: a key given twice or
// data after the object (which encoding/json alone would take silently: the last of two
// "sources", say), or JSON that is invalid or not a mixture's.
func mixtureSyntax(path string, err error) error {
	var se *strictjson.Error
	switch {
	case !errors.As(err, &se):
		return Usagef("%s is not a mixture file: %v (want {\"epoch_records\": N, \"sources\": [{\"data\": DATA, \"weight\": W, \"options\": {...}}, ...]}; docs/SHUFFLE.md)", path, err)
	case se.Kind == strictjson.Duplicate:
		return Usagef("%s has %v: give each key once (a mixture file is read strictly, as a dataset's manifest)", path, se)
	default:
		return Usagef("%s has %v: a mixture file is one JSON object; remove what follows it (or merge its sources into the first)", path, se)
	}
}

// source turns one source of a mixture file into its mount options: the command line's
// PerSource values (defaults), then the source's own options (paths relative to dir).
func (sd sourceDoc) source(defaults Values, dir string) (Source, error) {
	var src Source
	if sd.Data == "" {
		return src, fmt.Errorf("no \"data\": name the dataset (a directory, a file, s3://BUCKET/PREFIX)")
	}
	data := sd.Data
	if !IsRemote(data) && !filepath.IsAbs(data) {
		data = filepath.Join(dir, data)
	}
	if Locate(data).Kind == MixtureFile {
		return src, fmt.Errorf("%s is a mixture file; a mixture's sources are datasets (list its sources here instead)", sd.Data)
	}
	src.Name = sd.Name
	if src.Name == "" {
		src.Name = sd.Data
	}
	var err error
	if src.Rule, err = sd.rule(); err != nil {
		return src, err
	}
	vals := Values{}
	for name, text := range defaults {
		opt, _ := LookupOption(name)
		if name != "seed" && (IsRemote(data) || opt.Group != GroupDisk) {
			vals[name] = text
		}
	}
	own, err := DecodeJSON(sd.Options, PerSource, dir)
	if err != nil {
		return src, err
	}
	for name, text := range own {
		vals[name] = text
	}
	_, src.SeedGiven = own["seed"]
	src.Opt, err = Decode(data, "", vals)
	return src, err
}

// rule returns the source's one rule: weight, repeat or records.
func (sd sourceDoc) rule() (shuffle.Rule, error) {
	var rule shuffle.Rule
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
		var unq string
		if err := json.Unmarshal(r.raw, &unq); err == nil {
			if r.kind != shuffle.Repeat {
				return rule, fmt.Errorf("%s %q must be a JSON number (only repeat takes a fraction as a string, \"1/3\")", r.kind, unq)
			}
			text = unq
		}
		var err error
		if rule, err = shuffle.ParseRule(r.kind, text); err != nil {
			return rule, err
		}
	}
	if len(rules) != 1 {
		what := "none"
		if len(rules) > 0 {
			what = strings.Join(rules, " and ")
		}
		return rule, fmt.Errorf("give exactly one of \"weight\", \"repeat\" or \"records\" (it gives %s)", what)
	}
	return rule, nil
}

// DecodeJSON returns options given as a JSON object (a mixture source's "options"), keyed
// by the schema's keys (cache_size) or names: only options of scope; each value of its
// option's type (a string, a number, a boolean, a list of numbers for a shape); relative
// paths made absolute against dir.
func DecodeJSON(opts map[string]json.RawMessage, scope Scope, dir string) (Values, error) {
	vals := Values{}
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		opt, ok := LookupOption(k)
		if !ok || opt.Scope != scope {
			return nil, unknownOption(k, ok, scope)
		}
		text, err := jsonText(opt, opts[k])
		if err != nil {
			return nil, optionErr(opt.Name, "option %q: %v", k, err)
		}
		if _, twice := vals[opt.Name]; twice {
			return nil, optionErr(opt.Name, "option %q is given twice (as %q and %q)", k, opt.Key(), opt.Name)
		}
		if opt.Type == Path && text != "" && !filepath.IsAbs(text) {
			text = filepath.Join(dir, text) // relative to the mixture file, as data is
		}
		vals[opt.Name] = text
	}
	return vals, nil
}

// unknownOption is the error for option k that is not one of scope.
func unknownOption(k string, known bool, scope Scope) error {
	if known {
		return Usagef("option %q is an option of the whole mount: give it once on the command line (%s)", k, flag(strings.ReplaceAll(k, "_", "-")))
	}
	var keys []string
	for _, opt := range schema {
		if opt.Scope == scope {
			keys = append(keys, opt.Key())
		}
	}
	return Usagef("unknown option %q (a source takes %s)", k, strings.Join(keys, ", "))
}

// jsonText returns a JSON option value as its option's text: a string as it is, a number or
// a boolean as written, a list of numbers (a shape) comma-separated.
func jsonText(opt Option, raw json.RawMessage) (string, error) {
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
		if opt.Type != Bool {
			return "", fmt.Errorf("want %s, not a boolean", typeWords[opt.Type])
		}
		return fmt.Sprint(x), nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			n, ok := e.(json.Number)
			if !ok || opt.Type != Shape {
				return "", fmt.Errorf("a list must hold numbers and is for a shape (such as [3, 32, 32])")
			}
			parts[i] = n.String()
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("want a string, a number, a boolean or a list of numbers, not %s", string(raw))
}

// typeWords says what a value of each type is, in messages.
var typeWords = map[Type]string{
	Bool: "true or false", Int: "a whole number", Uint: "a whole number", Size: "a size (bytes, or text with units such as \"64MiB\")",
	String: "a string", Path: "a path", Duration: "a duration such as \"30s\"", Shape: "a list of dimensions", Enum: "one of its choices",
}

// parseWhole parses a positive whole number written exactly (no sign, no fraction).
func parseWhole(s string) (uint64, error) {
	var n uint64
	_, err := fmt.Sscan(s, &n)
	if err == nil && fmt.Sprint(n) != s {
		err = fmt.Errorf("not a whole number")
	}
	return n, err
}
