package api

import (
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/notifyd/notifyd/sdk/wire"
)

// Text that Postgres cannot store (invalid UTF-8, NUL) reached it from a
// path segment, a query parameter or a JSON string, and came back as a 500
// with the SQLSTATE in the log. Every request is checked here before its
// handler runs, and every JSON body in decodeJSON, so such input gets a 400
// naming where it was. Invalid UTF-8 is refused rather than rewritten:
// encoding/json would turn it into U+FFFD, and two different byte strings
// (two idempotency keys, two recipients) would become one.

// checkRequestText checks the path and every query parameter.
func checkRequestText(r *http.Request) *Error {
	if reason := textProblem(r.URL.Path); reason != "" {
		return badRequest("path %s", reason)
	}
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if reason := textProblem(k); reason != "" {
			return badRequest("a query parameter name %s", reason)
		}
		for _, v := range q[k] {
			if reason := textProblem(v); reason != "" {
				return badRequest("query parameter %s %s", k, reason)
			}
		}
	}
	return nil
}

// textProblem says why s cannot be stored as text ("" when it can).
func textProblem(s string) string {
	if err := wire.CheckText(s); err != nil {
		return err.Error()
	}
	return ""
}

// checkBodyText checks a JSON body's raw bytes for what decoding would
// silently rewrite: invalid UTF-8 and unpaired surrogate escapes (both
// become U+FFFD). A \u0000 escape decodes faithfully, and nulField then
// names the field that holds it.
func checkBodyText(b []byte) *Error {
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return badRequest("request body is not valid UTF-8 (byte %d)", i)
	}
	if p := wire.JSONEscapeProblem(b); p != "" && !strings.Contains(p, `\u0000`) {
		return badRequest("request body %s", p)
	}
	return nil
}

// nulField is the JSON path of the first string in v (a decoded request)
// that holds a NUL, "" when none does. Raw JSON fields (payloads) are left
// to their own checks.
func nulField(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return nulField(v.Elem(), path)
	case reflect.String:
		if strings.IndexByte(v.String(), 0) >= 0 {
			return path
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if p := nulField(v.Field(i), join(path, name)); p != "" {
				return p
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			k := fmt.Sprint(iter.Key().Interface())
			if strings.IndexByte(k, 0) >= 0 {
				return join(path, "(a key)")
			}
			if p := nulField(iter.Value(), join(path, k)); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "" // raw JSON: checked by its own rules
		}
		for i := range v.Len() {
			if p := nulField(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
