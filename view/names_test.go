package view

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseEpochName(t *testing.T) {
	good := map[string]struct {
		n    uint64
		kind Kind
	}{
		"epoch-0000":                 {0, Data},
		"epoch-0042.ids":             {42, IDs},
		"epoch-9999.offsets":         {9999, Offsets},
		"epoch-12345":                {12345, Data},
		"epoch-18446744073709551615": {1<<64 - 1, Data},
	}
	for name, want := range good {
		n, kind, ok := ParseEpochFile(name)
		assert.True(t, ok, name)
		assert.Equal(t, want.n, n, name)
		assert.Equal(t, want.kind, kind, name)
		assert.Equal(t, name[:len(EpochName(n))], EpochName(n))
	}
	for _, name := range []string{"epoch-", "epoch-1", "epoch-001", "epoch-00001", "epoch-abc", "epoch--1", "epoch-+001",
		"epoch-0000.idx", "epoch-0000.ids.ids", "epoch-99999999999999999999", "Epoch-0000", "epoch-0000 ", "epoch-0x10"} {
		_, _, ok := ParseEpochFile(name)
		assert.False(t, ok, name)
	}
}

func TestParseShardName(t *testing.T) {
	for name, want := range map[string][2]uint64{"shard-0-of-1": {0, 1}, "shard-3-of-8": {3, 8}, "shard-4294967295-of-4294967296": {1<<32 - 1, 1 << 32}} {
		r, w, ok := ParseShardDir(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, [2]uint64{r, w}, name)
	}
	for _, name := range []string{"shard-3-of-3", "shard-0-of-0", "shard-1-of-x", "shard-01-of-2", "shard-0-of-02", "shard--1-of-2",
		"shard-0-of-4294967297", "shard-0of-2", "shard-0-of-", "shard-0-of-2-of-3", "shard- 0-of-2"} {
		_, _, ok := ParseShardDir(name)
		assert.False(t, ok, name)
	}
}

// FuzzNames: the parsers never panic, and whatever they accept is canonical: formatting the
// result gives the name back.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"epoch-0000", "epoch-0001.ids", "epoch-12345.offsets", "shard-1-of-4", "shard-0-of-0", "epoch--1", "shard-1-of-x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if n, kind, ok := ParseEpochFile(name); ok {
			suffix := map[Kind]string{Data: "", IDs: IDsSuffix, Offsets: OffsetsSuffix}[kind]
			if EpochName(n)+suffix != name {
				t.Fatalf("%q parsed to epoch %d kind %d, which formats differently", name, n, kind)
			}
		}
		if r, w, ok := ParseShardDir(name); ok {
			if r >= w || w == 0 || w > MaxShards || "shard-"+strconv.FormatUint(r, 10)+"-of-"+strconv.FormatUint(w, 10) != name {
				t.Fatalf("%q parsed to %d of %d", name, r, w)
			}
		}
	})
}

// variableNames names the files of a variable-length dataset's epochs, as a Set of one does.
type variableNames struct{}

func (variableNames) Kinds() []Kind           { return []Kind{Data, IDs, Offsets} }
func (variableNames) Suffix(k Kind) string    { return kindSuffix[k] }
func (variableNames) OpenNames() (File, bool) { return nil, false }

// ParseEpochFile parses the name of a variable-length dataset's epoch file.
func ParseEpochFile(name string) (uint64, Kind, bool) { return ParseEpochFileOf(variableNames{}, name) }
