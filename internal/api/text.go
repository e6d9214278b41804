package api

import (
	"fmt"
	"net/http"
	"net/url"
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

// checkRequestText checks the path and every query parameter. A query
// string net/url cannot read whole (a `;` between parameters, a bad escape,
// more than 10,000 parameters) is refused: URL.Query, which the routes
// read, drops the part at fault silently (all of it, past 10,000), so a
// filter was taken for none.
func checkRequestText(r *http.Request) *Error {
	if reason := textProblem(r.URL.Path); reason != "" {
		return badRequest("path %s", reason)
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest("query string cannot be read: %v (give name=value parameters joined by &)", err)
	}
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
//
// The walk keeps the path as a stack of segments and joins it only for the
// value it reports: building each value's path as it went copied its
// parent's whole path at every level and for every array element, so a
// 400 KB key over 2,000 levels held 800 MB, and over 10,000 array elements
// allocated 4 GB, for one request within http.max_body_bytes. Its cost is
// now linear in the decoded value; the path it answers is cut at
// maxQuotedPath bytes.
func nulField(v reflect.Value, path string) string {
	w := nulWalk{}
	if !w.walk(v) {
		return ""
	}
	var b strings.Builder
	b.WriteString(path)
	for _, s := range w.stack {
		switch {
		case s.index >= 0:
			fmt.Fprintf(&b, "[%d]", s.index)
		case b.Len() > 0:
			b.WriteString(".")
			b.WriteString(s.name)
		default:
			b.WriteString(s.name)
		}
		if b.Len() > maxQuotedPath {
			break
		}
	}
	return wire.Truncate(b.String(), maxQuotedPath)
}

// maxQuotedPath bounds the JSON path an error quotes back.
const maxQuotedPath = 1024

// nulWalk is nulField's walk: the path down to the value being looked at.
type nulWalk struct{ stack []pathSeg }

// pathSeg is one step of a JSON path: an object's key, or an array's index
// when index ≥ 0.
type pathSeg struct {
	name  string
	index int
}

func (w *nulWalk) push(s pathSeg) { w.stack = append(w.stack, s) }
func (w *nulWalk) pop()           { w.stack = w.stack[:len(w.stack)-1] }

// walk reports whether v holds a NUL, leaving the path to it on the stack.
func (w *nulWalk) walk(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return false
		}
		return w.walk(v.Elem())
	case reflect.String:
		return strings.IndexByte(v.String(), 0) >= 0
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
			w.push(pathSeg{name: name, index: -1})
			if w.walk(v.Field(i)) {
				return true
			}
			w.pop()
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			key := iter.Key()
			var k string
			if key.Kind() == reflect.String {
				k = key.String()
			} else {
				k = fmt.Sprint(key.Interface())
			}
			if strings.IndexByte(k, 0) >= 0 {
				w.push(pathSeg{name: "(a key)", index: -1})
				return true
			}
			w.push(pathSeg{name: k, index: -1})
			if w.walk(iter.Value()) {
				return true
			}
			w.pop()
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return false // raw JSON: checked by its own rules
		}
		for i := range v.Len() {
			w.push(pathSeg{index: i})
			if w.walk(v.Index(i)) {
				return true
			}
			w.pop()
		}
	}
	return false
}
