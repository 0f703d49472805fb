package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/blockfs/blockfs/internal/optname"
	"github.com/blockfs/blockfs/mount"
	"github.com/blockfs/blockfs/mount/memory"
)

// parseMount runs `blockfs ARGV` with mount's run replaced: it returns the options mount
// would be given (mount.Decode of the flags), or the command's error and exit status.
func parseMount(t *testing.T, argv ...string) (mount.Options, error, int) {
	t.Helper()
	var got mount.Options
	saved := mountRun
	t.Cleanup(func() { mountRun = saved })
	mountRun = func(vals mount.Values, data, mnt string) (err error) {
		got, err = mount.Decode(data, mnt, vals)
		return err
	}
	root := newRoot()
	root.SetArgs(argv)
	root.SetOut(new(bytes.Buffer))
	root.SetErr(new(bytes.Buffer))
	err := root.Execute()
	if err != nil {
		return got, err, exitCode(err)
	}
	return got, nil, 0
}

func TestMountArgvToSpec(t *testing.T) {
	for _, tc := range []struct {
		argv  []string
		check func(t *testing.T, o mount.Options)
	}{
		{[]string{"mount", "data", "mnt"}, func(t *testing.T, o mount.Options) {
			assert.Equal(t, int64(0), o.CacheSize)
			assert.Equal(t, int64(mount.AutoReadahead), o.Readahead)
			assert.Equal(t, 0, o.Order.Mix) // auto
			assert.Equal(t, uint64(100), o.Epochs)
			assert.Equal(t, memory.DirectAuto, o.Direct)
			assert.Empty(t, o.Given)
		}},
		{[]string{"mount", "--cache-size", "1GiB", "--mix=4", "--seed", "7", "--shuffle", "full", "data", "mnt"}, func(t *testing.T, o mount.Options) {
			assert.Equal(t, int64(1<<30), o.CacheSize)
			assert.Equal(t, 4, o.Order.Mix)
			assert.Equal(t, uint64(7), o.Order.Seed)
			assert.Equal(t, "full", o.Order.Mode.String())
			assert.Equal(t, mount.Values{"cache-size": "1GiB", "mix": "4", "seed": "7", "shuffle": "full"}, o.Given)
		}},
		{[]string{"mount", "--readahead", "0", "--direct", "off", "--epochs", "3", "data", "mnt"}, func(t *testing.T, o mount.Options) {
			assert.Equal(t, int64(0), o.Readahead)
			assert.Equal(t, memory.DirectOff, o.Direct)
			assert.Equal(t, uint64(3), o.Epochs)
		}},
		{[]string{"mount", "--record-size", "4KiB", "--offset", "128", "--records", "10", "--dtype", "uint16", "--shape", "3, 4", "--window", "8", "--stride", "2", "f", "mnt"}, func(t *testing.T, o mount.Options) {
			in := o.InPlace
			assert.Equal(t, int64(4096), in.RecordSize)
			assert.Equal(t, int64(128), in.Offset)
			assert.Equal(t, int64(10), in.Records)
			assert.Equal(t, "uint16", in.DType)
			assert.Equal(t, []int64{3, 4}, in.Shape)
			assert.Equal(t, int64(8), in.Window)
			assert.Equal(t, int64(2), in.Stride)
		}},
		{[]string{"mount", "--s3-retries", "0", "--s3-part-size", "16MiB", "--s3-timeout", "1m", "s3://b/p", "mnt"}, func(t *testing.T, o mount.Options) {
			assert.Equal(t, -1, o.S3.Retries) // none, where 0 is the default's
			assert.Equal(t, int64(16<<20), o.S3.PartSize)
			assert.Equal(t, "1m0s", o.S3.Timeout.String())
		}},
		{[]string{"mount", "--s3-timeout", "90", "--s3-stall-timeout", "0.5", "s3://b/p", "mnt"}, func(t *testing.T, o mount.Options) {
			assert.Equal(t, "1m30s", o.S3.Timeout.String(), "a number is seconds, as Python's Mount passes it")
			assert.Equal(t, "500ms", o.S3.StallTimeout.String())
		}},
		{[]string{"mount", "--daemon", "--log", "/tmp/l", "--verify", "--allow-other", "--allow-other-unreadable", "data", "mnt"}, func(t *testing.T, o mount.Options) {
			assert.True(t, o.Daemon)
			assert.Equal(t, "/tmp/l", o.Log)
			assert.True(t, o.Verify && o.AllowOther && o.AllowOtherUnreadable)
		}},
		{[]string{"mount", "--verify=false", "--nodes", "4", "--node", "3", "--parts", "48", "data", "mnt"}, func(t *testing.T, o mount.Options) {
			assert.False(t, o.Verify)
			assert.Equal(t, mount.Nodes{Nodes: 4, Node: 3, Parts: 48}, o.Nodes)
		}},
	} {
		t.Run(fmt.Sprint(tc.argv), func(t *testing.T) {
			o, err, code := parseMount(t, tc.argv...)
			require.NoError(t, err)
			require.Equal(t, 0, code)
			tc.check(t, o)
		})
	}
}

func TestMountArgvToMessage(t *testing.T) {
	for _, tc := range []struct {
		argv   []string
		option string // the option the error names ("" for none)
		msg    string
	}{
		{[]string{"mount", "--cache-size", "12XB", "d", "m"}, "cache-size", `--cache-size "12XB" is not a size (use bytes or units such as 64KiB, 16MiB, 1GiB)`},
		{[]string{"mount", "--cache-size", "-1", "d", "m"}, "cache-size", "--cache-size -1: must not be negative"},
		{[]string{"mount", "--epochs", "0", "d", "m"}, "epochs", "--epochs 0 is out of range (1 to 10000"},
		{[]string{"mount", "--mix", "0", "d", "m"}, "mix", "--mix 0 is out of range (1 to 65536, or auto)"},
		{[]string{"mount", "--shuffle", "blocks", "--mix", "4", "d", "m"}, "mix", "--mix 4: mix 4 needs shuffle mode full (mode is blocks)"},
		{[]string{"mount", "--shuffle", "most", "d", "m"}, "shuffle", `--shuffle: unknown shuffle mode "most"`},
		{[]string{"mount", "--direct", "sometimes", "d", "m"}, "direct", `--direct: unknown value "sometimes" (want auto, on or off)`},
		{[]string{"mount", "--disk-cache-size", "1GiB", "d", "m"}, "disk-cache-size", "--disk-cache-size goes with --disk-cache DIR"},
		{[]string{"mount", "--disk-cache", "/tmp/x", "--disk-cache-size", "0", "s3://b/p", "m"}, "disk-cache-size", "--disk-cache-size 0 leaves no room"},
		{[]string{"mount", "--stride", "3", "d", "m"}, "stride", "--stride and --segments go with --window"},
		{[]string{"mount", "--shape", "3,x", "d", "m"}, "shape", "--shape 3,x: give the dimensions of one record, each at least 1"},
		{[]string{"mount", "--record-size", "0", "d", "m"}, "record-size", "--record-size must be at least 1 byte"},
		{[]string{"mount", "--window", "0", "d", "m"}, "window", "--window 0: give the rows per window"},
		{[]string{"mount", "--s3-concurrency", "0", "d", "m"}, "s3-concurrency", "--s3-concurrency 0 is out of range (1 to 256)"},
		{[]string{"mount", "--s3-part-size", "1MiB", "d", "m"}, "s3-part-size", "--s3-part-size 1MiB is out of range (5 MiB"},
		{[]string{"mount", "--s3-timeout", "soon", "d", "m"}, "s3-timeout", `--s3-timeout "soon" is not a duration`},
		{[]string{"mount", "--nodes", "-2", "d", "m"}, "nodes", "--nodes -2: need a positive count"},
		{[]string{"mount", "--allow-other-unreadable", "d", "m"}, "allow-other-unreadable", "--allow-other-unreadable goes with --allow-other"},
		{[]string{"mount", "--metrics-allow-remote", "d", "m"}, "metrics-allow-remote", "--metrics-allow-remote goes with --metrics ADDR"},
		{[]string{"mount", "--verify=maybe", "d", "m"}, "verify", `--verify "maybe": want true or false`},
		{[]string{"mount", "--cache-sise", "1GiB", "d", "m"}, "", "unknown flag: --cache-sise; did you mean --cache-size?"},
		{[]string{"mount", "--seeds", "3", "d", "m"}, "", "unknown flag: --seeds; did you mean --seed?"},
		{[]string{"mount", "d"}, "", "mount takes 2 arguments"},
		{[]string{"mount", "shards/a.tar", "shards/b.tar", "shards/c.tar", "m"}, "", "an unquoted glob? quote it so that blockfs expands it: mount 'shards/*.tar'"},
	} {
		t.Run(fmt.Sprint(tc.argv), func(t *testing.T) {
			_, err, code := parseMount(t, tc.argv...)
			require.Error(t, err)
			assert.Equal(t, 2, code, "a mistake in the command line exits 2: %v", err)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Equal(t, tc.option, optname.Of(err), "the error carries the option it is about")
		})
	}
	assert.Equal(t, 1, exitCode(errors.New("the disk failed")), "a failure that is not the command line's exits 1")
}

func TestMixtureOptionsDecode(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "tokens.bin")
	require.NoError(t, os.WriteFile(raw, make([]byte, 4096), 0o644))
	write := func(doc string) string {
		p := filepath.Join(dir, "mix.json")
		require.NoError(t, os.WriteFile(p, []byte(doc), 0o644))
		return p
	}
	mix := write(`{"sources": [{"data": "tokens.bin", "weight": 1, "options": {"record_size": 4, "mix": 2, "shape": [2], "dtype": "uint16", "window": 4, "segments": "seg.json"}},
		{"data": "tokens.bin", "weight": 3, "options": {"record-size": "8", "seed": 5}}]}`)
	o, err, code := parseMount(t, "mount", "--verify", "--s3-retries", "2", "--seed", "9", mix, "m")
	require.NoError(t, err)
	require.Equal(t, 0, code)
	require.NotNil(t, o.Mixture)
	require.Len(t, o.Mixture.Sources, 2)
	s0, s1 := o.Mixture.Sources[0], o.Mixture.Sources[1]
	assert.Equal(t, int64(4), s0.Opt.InPlace.RecordSize)
	assert.Equal(t, 2, s0.Opt.Order.Mix)
	assert.Equal(t, []int64{2}, s0.Opt.InPlace.Shape)
	assert.Equal(t, filepath.Join(dir, "seg.json"), s0.Opt.InPlace.Segments, "a path is relative to the mixture file")
	assert.True(t, s0.Opt.Verify, "the command line's source options are every source's defaults")
	assert.Equal(t, 2, s0.Opt.S3.Retries)
	assert.False(t, s0.SeedGiven, "the command line's seed is the mixture's, not a source's")
	assert.Equal(t, int64(8), s1.Opt.InPlace.RecordSize)
	assert.True(t, s1.SeedGiven)
	assert.Equal(t, uint64(5), s1.Opt.Order.Seed)
	assert.Equal(t, 2, len(o.Mixture.Sources))

	for _, tc := range []struct{ doc, msg string }{
		{`{"sources": [{"data": "tokens.bin", "weight": 1, "options": {"cache_size": "1GiB"}}]}`, `option "cache_size" is an option of the whole mount: give it once on the command line (--cache-size)`},
		{`{"sources": [{"data": "tokens.bin", "weight": 1, "options": {"recordsize": 4}}]}`, `unknown option "recordsize" (a source takes seed, shuffle, mix`},
		{`{"sources": [{"data": "tokens.bin", "weight": 1, "options": {"record_size": true}}]}`, `option "record_size": want a size`},
		{`{"sources": [{"data": "tokens.bin", "weight": 1, "options": {"record_size": 0}}]}`, `source 0 (tokens.bin): --record-size must be at least 1 byte`},
		{`{"sources": [{"data": "tokens.bin", "weight": 1, "repeat": 2, "options": {"record_size": 4}}]}`, `give exactly one of "weight", "repeat" or "records" (it gives weight and repeat)`},
		{`{"sources": [{"data": "tokens.bin", "weight": 1}], "sources": []}`, `give each key once`},
		{`{"sources": [{"data": "tokens.bin", "weight": 1, "options": {"record_size": 4, "record-size": 8}}]}`, `option "record_size" is given twice (as "record_size" and "record-size")`},
		{`{"sources": [{"data": "tokens.bin", "weight": 1, "options": {"verify": "yes"}}]}`, `--verify "yes": want true or false`},
		{`{"sources": [{"data": "tokens.bin", "weight": 1, "options": {"shape": [2, "x"]}}]}`, `a list must hold numbers`},
	} {
		_, err, code := parseMount(t, "mount", write(tc.doc), "m")
		require.Error(t, err, tc.doc)
		assert.Equal(t, 2, code, tc.doc)
		assert.Contains(t, err.Error(), tc.msg, tc.doc)
	}
	_, err, code = parseMount(t, "mount", "--record-size", "4", write(`{"sources": [{"data": "tokens.bin", "weight": 1}]}`), "m")
	assert.Equal(t, 2, code)
	assert.ErrorContains(t, err, `--record-size is a source's flag: `)
}

func TestOptionsSchemaPublished(t *testing.T) {
	var out bytes.Buffer
	saved := os.Stdout
	r, w, err := os.Pipe()
	require.NoError(t, err)
	os.Stdout = w
	err = printOptions(true)
	w.Close()
	os.Stdout = saved
	require.NoError(t, err)
	_, _ = out.ReadFrom(r)
	var doc struct {
		Options []optionDoc `json:"options"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	seen := map[string]bool{}
	root := newRoot()
	mountCmd, _, err := root.Find([]string{"mount"})
	require.NoError(t, err)
	for _, o := range doc.Options {
		assert.False(t, seen[o.Key], "key %s twice", o.Key)
		seen[o.Key] = true
		assert.NotEmpty(t, o.Help, o.Name)
		assert.Contains(t, []string{"mount", "source", "process"}, o.Scope, o.Name)
		assert.NotNil(t, mountCmd.Flags().Lookup(o.Name), "mount has a flag for every option (%s)", o.Name)
	}
	assert.True(t, seen["cache_size"] && seen["record_size"] && seen["disk_cache"])
	// And mount has no flag that is not an option (help aside).
	mountCmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			assert.True(t, seen[strings.ReplaceAll(f.Name, "-", "_")], "flag --%s is not in the schema", f.Name)
		}
	})
}

// TestStatsInterval: stats --interval takes seconds as Python does (1, 0.5), or Go's form.
func TestStatsInterval(t *testing.T) {
	for in, want := range map[string]time.Duration{"1": time.Second, "0.5": 500 * time.Millisecond, "2m": 2 * time.Minute} {
		var d seconds
		require.NoError(t, d.Set(in), in)
		assert.Equal(t, want, time.Duration(d), in)
	}
	var d seconds
	assert.ErrorContains(t, d.Set("soon"), "give seconds (1, 0.5) or a unit")
}

// TestVersion: a build from a checkout names its commit; the wheel's -X version is kept.
func TestVersion(t *testing.T) {
	info := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "2252ff6d2c1b0123456789"},
			{Key: "vcs.time", Value: "2026-11-28T21:03:11Z"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	assert.Equal(t, "dev (git 2252ff6d2c1b, 2026-11-28T21:03:11Z, modified)", versionOf("dev", info))
	assert.Equal(t, "0.9.1", versionOf("0.9.1", info))
	assert.Equal(t, "dev", versionOf("dev", func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{}, true }))
}

// TestLogFile: --log appends to a file of the user's, and refuses a symbolic link put where
// the log goes (the daemon would append to whatever it points at) with the reason.
func TestLogFile(t *testing.T) {
	dir := t.TempDir()
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	p := filepath.Join(dir, "mount.log")
	require.NoError(t, setupLog(p, nil))
	log.Print("a line")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Contains(t, string(b), "a line")

	target := filepath.Join(dir, "precious")
	require.NoError(t, os.WriteFile(target, []byte("keep me"), 0o644))
	link := filepath.Join(dir, "link.log")
	require.NoError(t, os.Symlink(target, link))
	err = setupLog(link, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--log "+link)
	b, err = os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(b))

	// The two names a user gives for no file of its own: nothing kept, or standard error.
	require.NoError(t, setupLog(os.DevNull, nil))
	assert.Equal(t, io.Discard, log.Writer())
	log.SetOutput(os.Stderr)
	require.NoError(t, setupLog("/dev/stderr", nil))
	assert.Equal(t, os.Stderr, log.Writer())
}
