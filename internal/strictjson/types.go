package strictjson

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// How keys of one object are compared depends on what the object decodes into, as
// encoding/json fills it: a struct's fields match keys without regard to case, so two keys
// equal when folded fill one field and are a key twice; a map (or an any) keeps keys that
// differ in case apart, so there only an exact repeat is a key twice. duplicateKeys walks
// the Go types alongside the JSON: a field's type for its key's value, an element type for
// an array's elements or a map's values, nothing below an any, a json.RawMessage or a value
// of another kind (keys there are compared exactly).

// fieldTypes is how the keys of a struct's object map to its fields' types, encoding/json's
// way: an exact name first, else the first field whose name folds the same.
type fieldTypes struct {
	exact  map[string]reflect.Type
	folded map[string]reflect.Type
}

// typeCache holds the fieldTypes of the structs met in one decode.
type typeCache map[reflect.Type]*fieldTypes

// valueType is what a JSON value held in t (a field's, an element's type) decodes into, for
// the scan: t without pointers; nil where nothing below is decoded by type (an any, a
// json.RawMessage, a scalar's type, or no field took the key).
func valueType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
		if t == rawMessage {
			return nil
		}
		return t
	}
	return nil
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// foldKeys reports whether keys of an object decoded into t are compared folded: t is a
// struct.
func foldKeys(t reflect.Type) bool { return t != nil && t.Kind() == reflect.Struct }

// child is the type the value of key (in an object) or of an element (in an array) of a
// value of type t decodes into; nil when none.
func (c typeCache) child(t reflect.Type, key string, fold []byte) reflect.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array:
		return valueType(t.Elem())
	case reflect.Struct:
		ft := c.fields(t)
		if f, ok := ft.exact[key]; ok {
			return f
		}
		return ft.folded[string(fold)]
	}
	return nil
}

// fields returns t's fieldTypes, computed once per decode.
func (c typeCache) fields(t reflect.Type) *fieldTypes {
	if ft, ok := c[t]; ok {
		return ft
	}
	ft := &fieldTypes{exact: map[string]reflect.Type{}, folded: map[string]reflect.Type{}}
	for _, f := range structFields(t) {
		ft.exact[f.name] = valueType(f.typ)
		k := string(appendFolded(nil, f.name))
		if _, ok := ft.folded[k]; !ok {
			ft.folded[k] = valueType(f.typ)
		}
	}
	c[t] = ft
	return ft
}

// field is one JSON field of a struct: its name and type, and where it is (its index path,
// for encoding/json's order and the rule that the shallowest of one name wins).
type field struct {
	name   string
	typ    reflect.Type
	index  []int
	tagged bool
}

// structFields lists t's JSON fields as encoding/json's typeFields does: exported fields and
// those of embedded structs (promoted), named by their tag; of several fields of one name,
// the shallowest (or the only tagged one of the shallowest) wins, and none where that is
// ambiguous.
func structFields(t reflect.Type) []field {
	var all []field
	visited := map[reflect.Type]bool{}
	next := []field{{typ: t}}
	for len(next) > 0 {
		current := next
		next = nil
		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			for i := range f.typ.NumField() {
				sf := f.typ.Field(i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if sf.Anonymous && !sf.IsExported() && ft.Kind() != reflect.Struct || !sf.Anonymous && !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				index := append(slices.Clone(f.index), i)
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					next = append(next, field{typ: ft, index: index})
					continue
				}
				tagged := name != ""
				if name == "" {
					name = sf.Name
				}
				all = append(all, field{name: name, typ: sf.Type, index: index, tagged: tagged})
			}
		}
	}
	return dominantFields(all)
}

// dominantFields keeps, of the fields of each name, the one encoding/json fills, in index
// order.
func dominantFields(all []field) []field {
	slices.SortStableFunc(all, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if len(a.index) != len(b.index) {
			return len(a.index) - len(b.index)
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	var out []field
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].name == all[i].name {
			j++
		}
		group := all[i:j]
		if len(group) == 1 || len(group[1].index) > len(group[0].index) || group[0].tagged && !group[1].tagged {
			out = append(out, group[0])
		}
		i = j
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	return out
}

// appendFolded appends s folded as encoding/json folds a key to match a field (its fold.go,
// appendFoldedName): ASCII upper-cased, any other rune to the smallest of its fold orbit
// (unicode.SimpleFold), so the Kelvin sign folds as "K" and the long s as "S".
func appendFolded(out []byte, s string) []byte {
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			out = append(out, byte(r))
			continue
		}
		out = utf8.AppendRune(out, foldRune(r))
	}
	return out
}

// foldRune is the smallest rune of r's fold orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
