package client

import (
	"encoding/json"
	"github.com/notifyd/notifyd/sdk/wire"
	"reflect"
	"strings"
)

// An answer within MaxAnswerBytes may still decode into far more: `{}` is
// 2 bytes and a NotificationInfo 328, an empty object in a job's template
// a map of its own. A hostile or broken server's 60 MiB of `{},` made the
// client hold 23 GB. decodedSize counts, before anything is decoded, the
// bytes of Go values decoding would allocate for the answer's structure —
// list elements at their type's size, maps, free-form values and what
// pointers point to — leaving out text, which the answer's own size
// bounds. The API's answers hold a few hundred bytes of values a row: a
// page of 1,000 dead letters is about half a megabyte of them.

// decodedSize is about what decoding b, valid JSON, into a value of type t
// allocates for its structure. It stops counting once past limit.
func decodedSize(b []byte, t reflect.Type, limit int64) int64 {
	s := sizeScan{b: b, limit: limit}
	s.value(t)
	return s.size
}

type sizeScan struct {
	b           []byte
	i           int
	size, limit int64
	fields      wire.Fields
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func (s *sizeScan) ws() {
	for s.i < len(s.b) && strings.IndexByte(" \t\r\n", s.b[s.i]) >= 0 {
		s.i++
	}
}

// value sizes the value at s.i, which decodes into t (nil: an interface, a
// free-form value), and moves past it.
func (s *sizeScan) value(t reflect.Type) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
		s.size += int64(t.Size()) // what the pointer points to
	}
	if t != nil && t.Kind() == reflect.Interface {
		t = nil
	}
	s.ws()
	if s.size > s.limit || s.i >= len(s.b) {
		s.i = len(s.b) // past the limit: nothing more to count
		return
	}
	c := s.b[s.i]
	switch {
	case t != nil && reflect.PointerTo(t).Implements(unmarshalerType):
		s.skip() // raw JSON kept as text, or a value in place (a time)
	case c == '{':
		s.object(t)
	case c == '[':
		s.array(t)
	case t != nil:
		s.skip() // text, or a number or boolean in place
	case c == '"':
		s.size += 16 // a string in an interface
		s.skip()
	default:
		s.size += 8 // a number in an interface (a boolean or null: less)
		s.skip()
	}
}

// skip moves past the value at s.i, counting nothing in it.
func (s *sizeScan) skip() {
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			s.str()
			if depth == 0 {
				return
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return // the end of the container the value is in
			}
			if depth--; depth == 0 {
				s.i++
				return
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return
			}
		}
		s.i++
	}
}

// str moves past the string at s.i and returns its content as written.
func (s *sizeScan) str() []byte {
	s.i++ // "
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return s.b[start : s.i-1]
		}
		s.i++
	}
	return s.b[start:]
}

func (s *sizeScan) object(t reflect.Type) {
	s.i++            // {
	var member int64 // what each member adds to its map
	switch {
	case t == nil: // a map[string]any
		s.size += 48
		member = 32
	case t.Kind() == reflect.Map:
		s.size += 48
		member = int64(t.Key().Size() + t.Elem().Size())
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == '}' {
			s.i++
			return
		}
		if s.size > s.limit {
			s.i = len(s.b)
			return
		}
		name := s.str()
		s.ws()
		s.i++ // :
		switch {
		case t == nil:
			s.size += member
			s.value(nil)
		case t.Kind() == reflect.Map:
			s.size += member
			s.value(t.Elem())
		case t.Kind() == reflect.Struct:
			if f := s.field(t, name); f != nil {
				s.value(f)
			} else {
				s.skip() // not one of its fields: not decoded
			}
		default: // a type error: not decoded
			s.skip()
		}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
		}
	}
}

func (s *sizeScan) array(t reflect.Type) {
	var elem reflect.Type
	per := int64(16) // an interface in a []any
	switch {
	case t == nil:
		s.size += 24 // the slice in its interface
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		elem, per = t.Elem(), int64(t.Elem().Size())
	default: // a type error: not decoded
		s.skip()
		return
	}
	s.i++ // [
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == ']' {
			s.i++
			return
		}
		if s.size += per; s.size > s.limit {
			s.i = len(s.b)
			return
		}
		s.value(elem)
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
		}
	}
}

// field is the type of the field of struct t that encoding/json fills with
// the member named raw (as written, escapes and all): its json name
// exactly, else one that matches it whatever the case; nil for none.
func (s *sizeScan) field(t reflect.Type, raw []byte) reflect.Type {
	name := string(raw)
	if strings.IndexByte(name, '\\') >= 0 {
		_ = json.Unmarshal([]byte(`"`+name+`"`), &name)
	}
	return s.fields.Of(t, name)
}
