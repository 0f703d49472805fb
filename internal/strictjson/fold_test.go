package strictjson

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecodeFoldsAsEncodingJSON: keys that encoding/json folds to one struct field (the
// Kelvin sign as "k", the long s as "s", the Ångström sign as "å", the Ohm sign as "ω") are a
// key twice, where upper-casing alone kept them apart and encoding/json took the last value.
func TestDecodeFoldsAsEncodingJSON(t *testing.T) {
	type target struct {
		Kind    string `json:"kind"`
		Sources string `json:"sources"`
		Ring    string `json:"å"`
		Omega   string `json:"ω"`
	}
	for _, c := range []struct{ in, want string }{
		{`{"kind": "fixed", "\u212aind": "variable"}`, "key \"\u212aind\" twice in the top-level object (at byte 18)"},
		{`{"\u212aIND": "variable", "kind": "fixed"}`, `key "kind" twice in the top-level object`},
		{`{"sources": "a", "\u017fources": "b"}`, "key \"\u017fources\" twice"},
		{`{"SOURCES": "a", "\u017fources": "b"}`, "key \"\u017fources\" twice"},
		{`{"å": "a", "\u212b": "b"}`, "key \"\u212b\" twice"},
		{`{"\u00c5": "a", "\u212b": "b"}`, "key \"\u212b\" twice"},
		{`{"ω": "a", "\u2126": "b"}`, "key \"\u2126\" twice"},
		{`{"Ω": "a", "\u2126": "b"}`, "key \"\u2126\" twice"},
	} {
		var v target
		require.NoError(t, json.Unmarshal([]byte(c.in), &v), c.in) // encoding/json: the last wins
		err := Decode([]byte(c.in), &v)
		require.Error(t, err, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
	}
}

// TestDecodeMapKeysExact: an object decoded into a map (or an any, or a json.RawMessage)
// keeps keys that differ in case apart, as encoding/json does, so they are accepted there; an
// exact repeat is still a key twice. The type is followed through pointers, slices, arrays
// and map values.
func TestDecodeMapKeysExact(t *testing.T) {
	type inner struct {
		Extra map[string]any `json:"extra"`
		Name  string         `json:"name"`
	}
	type outer struct {
		Items  []*inner                   `json:"items"`
		Pair   [1]inner                   `json:"pair"`
		ByName map[string]inner           `json:"by_name"`
		Raw    json.RawMessage            `json:"raw"`
		Any    any                        `json:"any"`
		Opts   map[string]json.RawMessage `json:"opts"`
		Ptr    *inner                     `json:"ptr"`
	}
	for _, in := range []string{
		`{"items": [{"extra": {"Label": 1, "label": 2, "LABEL": {"x": 1, "X": 2}}}]}`,
		`{"pair": [{"extra": {"\u212a": 1, "k": 2}}]}`,
		`{"by_name": {"a": {"name": "x"}, "A": {"name": "y", "extra": {"n": 1, "N": 2}}}}`,
		`{"raw": {"a": 1, "A": 2}, "any": {"a": [{"b": 1, "B": 2}], "A": 2}, "opts": {"seed": 1, "Seed": 2}}`,
		`{"ptr": {"extra": {"Label": 1, "label": 2}}}`,
	} {
		var v outer
		assert.NoError(t, Decode([]byte(in), &v), in)
	}
	for _, c := range []struct{ in, want string }{
		{`{"items": [{}, {"extra": {"Label": 1, "Label": 2}}]}`, `key "Label" twice in items[1].extra`},
		{`{"items": [{"NAME": "a", "name": "b"}]}`, `key "name" twice in items[0]`},
		{`{"pair": [{"Extra": {}, "extra": {}}]}`, `key "extra" twice in pair[0]`},
		{`{"by_name": {"a": {"name": "x"}, "a": {}}}`, `key "a" twice in by_name`},
		{`{"by_name": {"a": {"name": "x", "Name": "y"}}}`, `key "Name" twice in by_name.a`},
		{`{"any": {"a": {"b": 1, "b": 2}}}`, `key "b" twice in any.a`},
		{`{"ptr": {"extra": {"x": 1}, "EXTRA": {}}}`, `key "EXTRA" twice in ptr`},
		{`{"opts": {"seed": 1, "seed": 2}}`, `key "seed" twice in opts`},
	} {
		var v outer
		err := Decode([]byte(c.in), &v)
		require.Error(t, err, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
	}
	var m map[string]any
	assert.NoError(t, Decode([]byte(`{"a": 1, "A": 2}`), &m))
	assert.Len(t, m, 2)
	var a any
	assert.NoError(t, Decode([]byte(`[{"a": 1, "A": 2}]`), &a))
}

// TestDecodeStructFields: keys reach the field encoding/json fills: an exact name before a
// folded one, fields of embedded structs promoted, a field named by its Go name without a
// tag, "-" and unexported fields none.
func TestDecodeStructFields(t *testing.T) {
	type Embedded struct {
		Meta map[string]any `json:"meta"`
		Deep map[string]any
	}
	type target struct {
		Embedded
		M1    map[string]any  `json:"m"`
		M2    struct{ X int } `json:"M"`
		Skip  map[string]any  `json:"-"`
		Plain map[string]any
	}
	for _, in := range []string{
		`{"meta": {"a": 1, "A": 2}}`,
		`{"Deep": {"a": 1, "A": 2}, "Plain": {"a": 1, "A": 2}}`,
		`{"m": {"a": 1, "A": 2}}`,
	} {
		var v target
		assert.NoError(t, Decode([]byte(in), &v), in)
	}
	for _, c := range []struct{ in, want string }{
		{`{"M": {"x": 1, "X": 2}}`, `key "X" twice in M`},
		{`{"Meta": {"x": 1, "X": 2}}`, ``}, // folded to meta: a map
		{`{"Meta": {}, "meta": {}}`, `key "meta" twice in the top-level object`},
		{`{"Skip": {"x": 1, "X": 2}}`, ``}, // no field: compared exactly
	} {
		var v target
		err := Decode([]byte(c.in), &v)
		if c.want == "" {
			assert.NoError(t, err, c.in)
			continue
		}
		if assert.Error(t, err, c.in) {
			assert.Contains(t, err.Error(), c.want, c.in)
		}
	}
}

// TestDecodeFoldMatchesEncodingJSON: for random pairs of keys (letters whose case folds are
// irregular: the Kelvin, Ångström and Ohm signs, long s, dotted and dotless i, sharp s, title
// case letters, each written plain or \u-escaped; half the second keys a case variant of the
// first), Decode into a struct with a field named
// by the first key refuses {k1, k2} exactly when encoding/json fills that field from the
// second key alone; into a map, exactly when encoding/json keeps one entry.
func TestDecodeFoldMatchesEncodingJSON(t *testing.T) {
	letters := []rune("kK\u212asS\u017få\u00c5\u212bωΩ\u2126µμΜßẞiIİıéÉǄǅǆθΘϑϴaA")
	rng := rand.New(rand.NewPCG(3, 4))
	// word is a random key, or with like one of like's runes' case variants each (its
	// unicode.SimpleFold orbit, or an upper or lower case).
	word := func(like string) (plain, quoted string) {
		var p, q strings.Builder
		runes := []rune(like)
		if len(runes) == 0 {
			runes = make([]rune, 1+rng.IntN(3))
			for i := range runes {
				runes[i] = letters[rng.IntN(len(letters))]
			}
		}
		for _, r := range runes {
			if like != "" {
				orbit := []rune{r, unicode.ToUpper(r), unicode.ToLower(r)}
				for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
					orbit = append(orbit, o)
				}
				r = orbit[rng.IntN(len(orbit))]
			}
			p.WriteRune(r)
			if rng.IntN(2) == 0 {
				q.WriteString(`\u` + strconv.FormatInt(int64(0x10000+r), 16)[1:])
			} else {
				q.WriteRune(r)
			}
		}
		return p.String(), `"` + q.String() + `"`
	}
	same := 0
	for range 3000 {
		k1, q1 := word("")
		_, q2 := word("")
		if rng.IntN(2) == 0 {
			_, q2 = word(k1)
		}
		typ := reflect.StructOf([]reflect.StructField{{Name: "F", Type: reflect.TypeFor[*int](), Tag: reflect.StructTag(`json:"` + k1 + `"`)}})
		v := reflect.New(typ)
		require.NoError(t, json.Unmarshal([]byte(`{`+q2+`: 1}`), v.Interface()))
		one := !v.Elem().Field(0).IsNil()
		if one {
			same++
		}
		doc := []byte(`{` + q1 + `: 1, ` + q2 + `: 2}`)
		err := Decode(doc, reflect.New(typ).Interface())
		assert.Equal(t, one, err != nil, "%s into a field %q: %v", doc, k1, err)

		var m map[string]int
		require.NoError(t, json.Unmarshal(doc, &m))
		err = Decode(doc, &map[string]int{})
		assert.Equal(t, len(m) == 1, err != nil, "%s into a map: %v", doc, err)
	}
	assert.Greater(t, same, 100, "pairs encoding/json takes for one field")
	t.Logf("%d of 3000 pairs fill one field", same)
}
