package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/notifyd/notifyd/sdk/wire"
)

// Decoding builds Go values many times larger than the JSON that names
// them: `{}` is 2 bytes and one notification of a request 88, a `{"k":1}`
// of attributes a map of about 300. A 1 MiB body of
// {"notifications":[{},{},…]} allocated 172 MiB (60 MB live) before its
// 1,000-notification bound was checked, and 16 such requests from one
// client, within its share of http.max_inflight_body_bytes, held 1 GiB. So
// a body's values are counted before it is decoded, in one pass that builds
// nothing, and a body holding more than any request within its fields'
// bounds needs is refused.
const (
	// maxBodyValues bounds the JSON values a body holds outside its raw
	// payloads: twice what 64 KiB of attributes or of a campaign template
	// (their bound) can hold, one character a value.
	maxBodyValues = 1 << 16
	// maxBodyMembers bounds the members of one list or map of the
	// request's own typed values (notifications, ids, topics, addresses):
	// ten times the largest of their bounds (wire.MaxBatch), so a request
	// just past one still gets that field's own message.
	maxBodyMembers = 10 * wire.MaxBatch
)

// checkBodyValues counts the values of b, a JSON text decoding into a value
// of type t, and refuses it (413, naming where) past maxBodyValues or past
// maxBodyMembers in one typed list or map. A raw payload (json.RawMessage,
// or any other json.Unmarshaler) counts as one value: it is copied, not
// decoded. A body that is not valid JSON is left to the decoder, which says
// where, and builds nothing before it has read the whole text.
func checkBodyValues(b []byte, t reflect.Type) *Error {
	s := valueCount{dec: jsontext.NewDecoder(bytes.NewReader(b),
		jsontext.AllowDuplicateNames(true), // wire.RepeatedKey names a repeat, after the decode
		jsontext.AllowInvalidUTF8(true))}   // checkBodyText refused it already
	err := s.value(t)
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

type valueCount struct {
	dec    *jsontext.Decoder
	values int
	fields wire.Fields // each struct's, as encoding/json fills them
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// value counts the next value, which decodes into t (nil: free-form).
func (s *valueCount) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t.Kind() == reflect.Interface {
		t = nil
	}
	if t != nil && reflect.PointerTo(t).Implements(unmarshaler) {
		if err := s.dec.SkipValue(); err != nil {
			return err
		}
		return s.count()
	}
	tok, err := s.dec.ReadToken()
	if err != nil {
		return err
	}
	if err := s.count(); err != nil {
		return err
	}
	switch tok.Kind() {
	case '{':
		return s.object(t)
	case '[':
		return s.array(t)
	}
	return nil
}

func (s *valueCount) count() error {
	if s.values++; s.values > maxBodyValues {
		return errorf(http.StatusRequestEntityTooLarge, wire.CodeBodyTooLarge,
			"request body holds more than %d JSON values outside its payloads (at %s): no request within its fields' bounds needs that many",
			maxBodyValues, s.where(0))
	}
	return nil
}

// object counts the members of an object just begun, which decodes into t.
func (s *valueCount) object(t reflect.Type) error {
	typed := t != nil && t.Kind() == reflect.Map && t.Elem().Kind() != reflect.Interface
	for n := 0; ; n++ {
		if s.dec.PeekKind() == '}' {
			_, err := s.dec.ReadToken()
			return err
		}
		name, err := s.dec.ReadToken()
		if err != nil {
			return err
		}
		var child reflect.Type
		switch {
		case t == nil:
		case t.Kind() == reflect.Map:
			child = t.Elem()
		case t.Kind() == reflect.Struct:
			f := s.field(t, name.String())
			if f == nil { // refused by the decoder (an unknown field), which skips it
				if err := s.dec.SkipValue(); err != nil {
					return err
				}
				continue
			}
			child = f
		default: // not an object's type: a type error, and the decoder skips it
			if err := s.dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if typed && n >= maxBodyMembers {
			return s.tooManyMembers()
		}
		if err := s.value(child); err != nil {
			return err
		}
	}
}

// array counts the elements of an array just begun, which decodes into t.
func (s *valueCount) array(t reflect.Type) error {
	var elem reflect.Type
	if t != nil {
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			// A type error: the decoder skips the array without building it.
			return s.skipRest()
		}
		elem = t.Elem()
	}
	typed := elem != nil && elem.Kind() != reflect.Interface
	for n := 0; ; n++ {
		if s.dec.PeekKind() == ']' {
			_, err := s.dec.ReadToken()
			return err
		}
		if typed && n >= maxBodyMembers {
			if _, err := s.dec.ReadToken(); err != nil { // the member the pointer names
				return err
			}
			return s.tooManyMembers()
		}
		if err := s.value(elem); err != nil {
			return err
		}
	}
}

// skipRest skips the rest of an array just begun.
func (s *valueCount) skipRest() error {
	for s.dec.PeekKind() != ']' {
		if err := s.dec.SkipValue(); err != nil {
			return err
		}
	}
	_, err := s.dec.ReadToken()
	return err
}

// tooManyMembers names the list or map whose member was last read.
func (s *valueCount) tooManyMembers() error {
	return errorf(http.StatusRequestEntityTooLarge, wire.CodeBodyTooLarge,
		"%s has more than %d members: no request within its fields' bounds needs that many", s.where(1), maxBodyMembers)
}

// where is the JSON path of the value last read, or of its container up
// drop levels, as the API's messages write one (notifications[3].payload),
// cut at maxQuotedPath.
func (s *valueCount) where(drop int) string {
	p := s.dec.StackPointer()
	for range drop {
		p = p.Parent()
	}
	var b strings.Builder
	level := 1
	for tok := range p.Tokens() {
		if kind, _ := s.dec.StackIndex(level); kind == '[' {
			b.WriteString("[" + tok + "]")
		} else {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		}
		level++
		if b.Len() > maxQuotedPath {
			break
		}
	}
	if b.Len() == 0 {
		return "the top level"
	}
	return wire.Truncate(b.String(), maxQuotedPath)
}

// field is the type of the field of struct t that encoding/json fills with
// the member name; nil for none.
func (s *valueCount) field(t reflect.Type, name string) reflect.Type { return s.fields.Of(t, name) }
