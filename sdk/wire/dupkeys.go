package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// RepeatedKey finds the first object key given twice in b, valid JSON that
// decodes into a value of type t (nil: free-form, as a payload), and names
// it and where it is; nil when every key is given once. encoding/json keeps
// the last of a repeated key and Postgres' jsonb does too, so
// {"text":"approved","text":"denied"} would be sent as denied while a log,
// a proxy or a reviewer that reads the first saw approved (docs/design.md
// §10). Every door holds what it takes to it (the API's request bodies,
// EnqueueTx's payload through txoutbox.Row.Check, the CLI's --payload), so
// what one refuses, none stores.
//
// name is what b is called in the answer's path ("payload": a repeat inside
// it is at payload.m[1]); "" leaves the top level unnamed (Path "").
//
// It is one pass over bytes already known to be valid JSON, so it parses
// nothing again: it only finds where keys are and compares them. Its cost is
// linear in len(b). Where an object fills a struct, keys are compared as
// encoding/json matches them to fields (case-insensitively), so "channel"
// and "Channel" are one key; in a free-form object (a payload, attributes, a
// map) keys are compared exactly.
func RepeatedKey(b []byte, t reflect.Type, name string) *RepeatedKeyError {
	s := keyScan{b: b}
	if name != "" {
		s.path = []string{name}
	}
	return s.value(t)
}

// RepeatedKeyError is a key given twice in one JSON object.
type RepeatedKeyError struct {
	// Path is where the object is: notifications[1].payload, payload.m[1];
	// "" for the top level of an unnamed value.
	Path string
	// Key is the repeat as given; First is the key it repeats as first given,
	// which differs from Key only when both fill one struct field
	// ("Channel" repeating "channel").
	Key, First string
}

// Error names the key and where it is:
// payload.m[1]: key "k" is given twice; give each key once.
func (e *RepeatedKeyError) Error() string {
	msg := fmt.Sprintf("key %q is given twice; give each key once", Truncate(e.Key, 100))
	if e.First != e.Key {
		msg = fmt.Sprintf("key %q repeats %q (field names match whatever their case); give each key once",
			Truncate(e.Key, 100), Truncate(e.First, 100))
	}
	if e.Path == "" {
		return msg
	}
	return e.Path + ": " + msg
}

// keyScan walks a valid JSON text.
type keyScan struct {
	b      []byte
	i      int
	path   []string // keys and [indexes] down to the current value
	fields map[reflect.Type][]jsonField
}

type jsonField struct {
	name string
	typ  reflect.Type
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// target is what a JSON value decoding into t fills: t without pointers,
// or nil when the value is free-form (an interface, json.RawMessage or any
// other Unmarshaler), whose keys are compared exactly.
func target(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	return t
}

func (s *keyScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *keyScan) value(t reflect.Type) *RepeatedKeyError {
	s.ws()
	if s.i >= len(s.b) {
		return nil
	}
	switch s.b[s.i] {
	case '{':
		return s.object(target(t))
	case '[':
		return s.array(target(t))
	case '"':
		s.str()
	default: // a number, true, false or null
		for s.i < len(s.b) && !strings.ContainsRune(",}] \t\r\n", rune(s.b[s.i])) {
			s.i++
		}
	}
	return nil
}

// str skips a string at s.i and returns its raw content and whether it has
// escapes.
func (s *keyScan) str() (raw []byte, escaped bool) {
	s.i++ // the opening quote
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			escaped = true
			continue
		case '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped
		}
		s.i++
	}
	return s.b[start:], escaped
}

func (s *keyScan) object(t reflect.Type) *RepeatedKeyError {
	s.i++                      // {
	var seen map[string]string // what a key fills → the key as first given
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == '}' {
			s.i++
			return nil
		}
		raw, escaped := s.str()
		key := string(raw)
		if escaped {
			_ = json.Unmarshal(s.b[s.i-len(raw)-2:s.i], &key) // valid: encoding/json read it
		}
		fills, child := key, reflect.Type(nil)
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fills, child = s.field(t, key)
			case reflect.Map:
				child = t.Elem()
			}
		}
		if first, dup := seen[fills]; dup {
			return &RepeatedKeyError{Path: s.where(), Key: key, First: first}
		}
		if seen == nil {
			seen = map[string]string{}
		}
		seen[fills] = key
		s.ws()
		s.i++ // :
		s.path = append(s.path, key)
		if e := s.value(child); e != nil {
			return e
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
		}
	}
}

func (s *keyScan) array(t reflect.Type) *RepeatedKeyError {
	s.i++ // [
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	for n := 0; ; n++ {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == ']' {
			s.i++
			return nil
		}
		s.path = append(s.path, "["+strconv.Itoa(n)+"]")
		if e := s.value(elem); e != nil {
			return e
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
		}
	}
}

// field is the struct field key fills, as encoding/json picks it (an exact
// name first, then one equal whatever the case), and its type.
func (s *keyScan) field(t reflect.Type, key string) (string, reflect.Type) {
	fs, ok := s.fields[t]
	if !ok {
		fs = jsonFields(t)
		if s.fields == nil {
			s.fields = map[reflect.Type][]jsonField{}
		}
		s.fields[t] = fs
	}
	for _, f := range fs {
		if f.name == key {
			return f.name, f.typ
		}
	}
	for _, f := range fs {
		if strings.EqualFold(f.name, key) {
			return f.name, f.typ
		}
	}
	return key, nil // unknown fields were refused by the decoder
}

// jsonFields are t's fields as JSON names them, an embedded struct's
// promoted.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" || (f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct) {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	return out
}

// where is the current path as notifications[3].payload.text.
func (s *keyScan) where() string {
	var b strings.Builder
	for i, p := range s.path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(Truncate(p, 100))
	}
	return b.String()
}
