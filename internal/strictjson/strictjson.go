// Package strictjson decodes the JSON files blockfs reads (a dataset's manifest, a mixture
// file) strictly, so that a file means one thing: numbers kept exact (json.Number), one value
// and nothing after it but white space, and no key twice in one object. encoding/json alone
// takes the last of two equal keys silently, and its Decoder stops after the first value, so
// a hand-edited file could say one thing to a reader and another to blockfs.
//
// Keys are compared after unescaping, as encoding/json matches them: in an object decoded
// into a struct, without regard to case, folded exactly as encoding/json folds ("Sources" and
// "sources" fill one field, and so do "kind" and "\u212aind", with a Kelvin sign); in an
// object decoded into a map or an any, exactly (there "Label" and "label" are two keys, and
// only a repeat of one is a key twice). types.go walks the Go types alongside the JSON.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is what an Error found.
type Kind int

const (
	Trailing  Kind = iota // data after the value
	Duplicate             // a key twice in one object
)

// Error is a way the data is not strict JSON, besides being invalid JSON. Its message is a
// noun phrase to follow "has" ("mix.json has key \"sources\" twice in the top-level object (at
// byte 80)"); the caller says what to do.
type Error struct {
	Kind   Kind
	Offset int64  // of the trailing data, or of the second key
	Key    string // a Duplicate's key, as written (unescaped)
	Where  string // a Duplicate's object: "the top-level object", "sources[1]", "blocks[0].names"
}

func (e *Error) Error() string {
	if e.Kind == Trailing {
		return fmt.Sprintf("trailing data after the JSON value (at byte %d)", e.Offset)
	}
	return fmt.Sprintf("key %q twice in %s (at byte %d)", e.Key, e.Where, e.Offset)
}

// Decode decodes data, which must hold one JSON value, into v with numbers as json.Number
// (into an any). Unknown keys are ignored, as encoding/json ignores them. It returns
// encoding/json's error for invalid JSON or a value of the wrong type, and an *Error for data
// after the value or a key given twice.
func Decode(data []byte, v any) error { return decode(data, v, false) }

// DecodeKnown is Decode that also refuses a key no field of v's structs takes (encoding/json's
// DisallowUnknownFields; keys of maps are any).
func DecodeKnown(data []byte, v any) error { return decode(data, v, true) }

func decode(data []byte, v any, known bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if known {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		return &Error{Kind: Trailing, Offset: int64(len(data) - len(rest))}
	}
	return duplicateKeys(data[:end], valueType(reflect.TypeOf(v)))
}

// maxListedKeys is how many keys of an object are compared by a list; an object with more
// keeps them in a map.
const maxListedKeys = 16

// frame is an open object or array while duplicateKeys scans.
type frame struct {
	object bool
	fold   bool         // an object's keys are compared folded (it decodes into a struct)
	typ    reflect.Type // what the value decodes into; nil: nothing by type
	val    reflect.Type // what its current element, or the value of its last key, decodes into
	index  int          // an array's element being read
	name   string       // an object's last key, as written
	keys   []string     // an object's keys, as compared (the first maxListedKeys)
	set    map[string]struct{}
}

// has reports whether the object has key k (folded) and adds it.
func (f *frame) has(k string) bool {
	if f.set != nil {
		_, ok := f.set[k]
		f.set[k] = struct{}{}
		return ok
	}
	for _, o := range f.keys {
		if o == k {
			return true
		}
	}
	if f.keys = append(f.keys, k); len(f.keys) > maxListedKeys {
		f.set = make(map[string]struct{}, 2*len(f.keys))
		for _, o := range f.keys {
			f.set[o] = struct{}{}
		}
	}
	return false
}

// duplicateKeys returns an *Error for the first key given twice in one object of data, which
// is valid JSON (encoding/json has read it into a value of type root, nil for an any), else
// nil.
func duplicateKeys(data []byte, root reflect.Type) error {
	var stack []frame
	var fold []byte
	interned := map[string]string{} // keys as compared, allocated once each
	types := typeCache{}
	expectKey := false
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			t := root
			if len(stack) > 0 {
				t = stack[len(stack)-1].val
			}
			if len(stack) < cap(stack) {
				stack = stack[:len(stack)+1]
			} else {
				stack = append(stack, frame{})
			}
			f := &stack[len(stack)-1]
			f.object, f.index, f.keys, f.set = data[i] == '{', 0, f.keys[:0], nil
			f.typ, f.fold, f.val = t, f.object && foldKeys(t), nil
			if !f.object {
				f.val = types.child(t, "", nil)
			}
			expectKey = f.object
		case '}', ']':
			stack = stack[:len(stack)-1]
			expectKey = false
		case ',':
			if f := &stack[len(stack)-1]; f.object {
				expectKey = true
			} else {
				f.index++
			}
		case '"':
			j := stringEnd(data, i)
			if expectKey {
				f := &stack[len(stack)-1]
				name := keyName(data[i : j+1])
				fold = appendFolded(fold[:0], name)
				f.val = types.child(f.typ, name, fold)
				if !f.fold {
					fold = append(fold[:0], name...)
				}
				k, ok := interned[string(fold)]
				if !ok {
					k = string(fold)
					interned[k] = k
				}
				if f.has(k) {
					return &Error{Kind: Duplicate, Offset: int64(i), Key: name, Where: where(stack)}
				}
				f.name = name
				expectKey = false
			}
			i = j
		}
	}
	return nil
}

// stringEnd returns the index of the quote that ends the string starting at data[i].
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(data) - 1 // not reached: data is valid JSON
}

// keyName is a key's string, quoted as written, unescaped as encoding/json reads it.
func keyName(quoted []byte) string {
	plain := true
	for _, c := range quoted[1 : len(quoted)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(quoted[1 : len(quoted)-1])
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return string(quoted) // not reached: data is valid JSON
	}
	return s
}

// where names the innermost object of stack, as a path from the top: "sources[1]".
func where(stack []frame) string {
	if len(stack) == 1 {
		return "the top-level object"
	}
	var b strings.Builder
	for _, f := range stack[:len(stack)-1] {
		if f.object {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.name)
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return b.String()
}
