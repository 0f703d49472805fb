package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type doc struct {
	Sources []struct {
		Data    string                     `json:"data"`
		Options map[string]json.RawMessage `json:"options"`
	} `json:"sources"`
	N json.Number `json:"n"`
}

// TestDecodeRefuses: trailing data and a key twice, anywhere, are refused with where they
// are; encoding/json's own errors pass through; what encoding/json accepts otherwise, this
// accepts, with numbers exact.
func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"n": 1} {"n": 2}`, "trailing data after the JSON value (at byte 9)"},
		{`{"n": 1}]`, "trailing data after the JSON value (at byte 8)"},
		{`{"n": 1}` + "\n\x00", "trailing data after the JSON value (at byte 9)"},
		{`{"n": 1, "n": 2}`, `key "n" twice in the top-level object (at byte 9)`},
		{`{"sources": [], "n": 1, "sources": [{"data": "x"}]}`, `key "sources" twice in the top-level object (at byte 24)`},
		{`{"sources": [{"data": "a"}, {"data": "b", "data": "c"}]}`, `key "data" twice in sources[1] (at byte 42)`},
		{`{"sources": [{"data": "a", "options": {"seed": 1, "seed": 2}}]}`, `key "seed" twice in sources[0].options (at byte 50)`},
		{`{"Sources": [], "sources": []}`, `key "sources" twice in the top-level object`},
		{`{"n": 1, "\u006e": 2}`, `key "n" twice in the top-level object`},
		{`{"n": 1, "N": 2}`, `key "N" twice`},
		{`{"n": 1,}`, "invalid character '}'"},
		{`{"sources": 3}`, "cannot unmarshal number"},
	} {
		var d doc
		err := Decode([]byte(c.in), &d)
		require.Error(t, err, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
	}
	var d doc
	require.NoError(t, Decode([]byte(" {\"n\": 12345678901234567890, \"x\": {\"n\": 1}, \"sources\": [{\"data\": \"a\\\"n\\\"\", \"options\": {\"n\": 1}}, {\"data\": \"n\"}]}\r\n\t "), &d))
	assert.Equal(t, "12345678901234567890", d.N.String())
	assert.Equal(t, `a"n"`, d.Sources[0].Data)
	var se *Error
	require.True(t, errors.As(Decode([]byte(`{"n":1}{}`), &d), &se))
	assert.Equal(t, Trailing, se.Kind)
	require.True(t, errors.As(Decode([]byte(`{"n":1,"n":1}`), &d), &se))
	assert.Equal(t, Duplicate, se.Kind)
	assert.Contains(t, DecodeKnown([]byte(`{"n": 1, "other": 2}`), &d).Error(), `unknown field "other"`)
	assert.NoError(t, Decode([]byte(`{"n": 1, "other": 2}`), &d))
}

// TestDuplicateKeysMatchTokens: on random documents (objects of many keys, nested, some keys
// repeated, some differing in case only) decoded into an any, duplicateKeys finds a key twice
// exactly where a scan with encoding/json's tokens finds the first exact repeat; into a
// struct, the top-level object's keys are compared folded, the others (an any's) exactly.
func TestDuplicateKeysMatchTokens(t *testing.T) {
	t.Run("any", func(t *testing.T) { duplicateKeysMatchTokens(t, nil) })
	t.Run("struct", func(t *testing.T) { duplicateKeysMatchTokens(t, reflect.TypeFor[struct{ A any }]()) })
}

func duplicateKeysMatchTokens(t *testing.T, root reflect.Type) {
	rng := rand.New(rand.NewPCG(1, 2))
	dups := 0
	defer func() {
		assert.Greater(t, dups, 200, "documents with a key twice")
		t.Logf("%d of 2000 with a key twice", dups)
	}()
	for i := range 2000 {
		var b strings.Builder
		randomValue(rng, &b, 0)
		data := []byte(b.String())
		require.True(t, json.Valid(data), "%s", data)
		want := firstDuplicate(t, data, root != nil)
		if want >= 0 {
			dups++
		}
		err := duplicateKeys(data, root)
		if want < 0 {
			assert.NoError(t, err, "doc %d: %s", i, data)
			continue
		}
		var se *Error
		require.True(t, errors.As(err, &se), "doc %d: %s", i, data)
		assert.EqualValues(t, want, se.Offset, "doc %d: %s", i, data)
	}
}

// randomValue writes a random JSON value: objects of up to 40 keys from a small alphabet
// (so some repeat, some differ by case only), arrays, strings with escapes, numbers.
func randomValue(rng *rand.Rand, b *strings.Builder, depth int) {
	keys := []string{`a`, `b`, `A`, `key`, `k\u0065y`, `s\"q`, `é`, `É`, `x\\`, `\u212aey`, `ſ`}
	switch k := rng.IntN(6); {
	case k < 2 && depth < 4:
		b.WriteString("{")
		n := rng.IntN(3)
		if rng.IntN(4) == 0 {
			n = rng.IntN(40)
		}
		for j := range n {
			if j > 0 {
				b.WriteString(", ")
			}
			if rng.IntN(3) == 0 {
				fmt.Fprintf(b, `"%s"`, keys[rng.IntN(len(keys))])
			} else {
				fmt.Fprintf(b, `"k%d"`, j)
			}
			b.WriteString(": ")
			randomValue(rng, b, depth+1)
		}
		b.WriteString("}")
	case k < 4 && depth < 4:
		b.WriteString("[")
		for j := range rng.IntN(4) {
			if j > 0 {
				b.WriteString(",")
			}
			randomValue(rng, b, depth+1)
		}
		b.WriteString("]")
	case k == 4:
		fmt.Fprintf(b, `"{[,\"%s"`, keys[rng.IntN(len(keys))])
	default:
		fmt.Fprintf(b, "%d", rng.IntN(1000))
	}
}

// firstDuplicate is the byte offset of the first key repeated in an object, by
// encoding/json's tokens (compared folded in the top-level object with foldTop, else
// exactly); -1 when none.
func firstDuplicate(t *testing.T, data []byte, foldTop bool) int64 {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	type obj struct {
		keys    map[string]bool
		wantKey bool
		fold    bool
	}
	var stack []*obj
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return -1
		}
		top := (*obj)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.wantKey {
			k := s
			if top.fold {
				k = string(appendFolded(nil, s))
			}
			if top.keys[k] {
				// The offset before the token is that of the separator before it.
				return int64(strings.IndexByte(string(data[before:]), '"')) + before
			}
			top.keys[k] = true
			top.wantKey = false
			continue
		}
		if top != nil && top.keys != nil {
			top.wantKey = true // a value was read: next comes a key
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &obj{keys: map[string]bool{}, wantKey: true, fold: foldTop && len(stack) == 0})
		case json.Delim('['):
			stack = append(stack, &obj{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].keys != nil {
				stack[len(stack)-1].wantKey = true
			}
		}
	}
}

// FuzzDecode: Decode (into an any) never panics, and a document it accepts has no key repeated
// exactly by encoding/json's tokens; one that is valid JSON with no key twice, it accepts.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"a": [1, {"b": "\"", "B": 2}], "c": {}}`))
	f.Add([]byte(`{"\u0061": 1, "a": 2}`))
	f.Add([]byte(`[{"x": 1}, {"x": 1}] 7`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		err := Decode(data, &v)
		if !json.Valid(data) {
			require.Error(t, err)
			return
		}
		if dup := firstDuplicate(t, data, false); dup >= 0 {
			require.Error(t, err, "a key twice at byte %d", dup)
		} else {
			require.NoError(t, err)
		}
	})
}
