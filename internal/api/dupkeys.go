package api

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"github.com/notifyd/notifyd/sdk/wire"
)

// repeatedKey finds the first object key given twice in body, a JSON value
// that decoded into a value of type t, and answers it 400 naming the key and
// where it is; nil when every key is given once. encoding/json keeps the
// last of a repeated key and Postgres' jsonb does too, so
// {"channel":"a","channel":"b"} would go to b while a log or a proxy that
// reads the first saw a (docs/design.md §10).
//
// It is one pass over bytes encoding/json has already accepted, so it
// parses nothing again: it only finds where keys are and compares them. Its
// cost is linear in the body, which http.max_body_bytes bounds. Where the
// object fills a struct, keys are compared as encoding/json matches them to
// fields (case-insensitively), so "channel" and "Channel" are one key; in a
// free-form object (a payload, attributes, a map) keys are compared exactly.
func repeatedKey(body []byte, t reflect.Type) *Error {
	s := keyScan{b: body}
	return s.value(t)
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

func (s *keyScan) value(t reflect.Type) *Error {
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

func (s *keyScan) object(t reflect.Type) *Error {
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
			where := "the request body"
			if len(s.path) > 0 {
				where = s.where()
			}
			if first != key {
				return badRequest("%s: key %q repeats %q (field names match whatever their case); give each key once",
					where, wire.Truncate(key, 100), wire.Truncate(first, 100))
			}
			return badRequest("%s: key %q is given twice; give each key once", where, wire.Truncate(key, 100))
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

func (s *keyScan) array(t reflect.Type) *Error {
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
		b.WriteString(wire.Truncate(p, 100))
	}
	return b.String()
}
