package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// Decode unmarshals the channel's config into v strictly: an unknown key, a
// value of the wrong type or trailing data is an error that names the key,
// in words an operator can act on ("config.url: want string, got number";
// `config: unknown key "ulr" (known: headers, timeout, url)`).
// Checking required keys and value ranges is the caller's job, with errors
// in the same style.
//
//	var cfg struct{ URL string `json:"url"` }
//	if err := req.Decode(&cfg); err != nil {
//		return nil, err
//	}
func (r ConfigureRequest) Decode(v any) error {
	raw := bytes.TrimSpace(r.Config)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			if key, known, ok := unknownKey(raw, reflect.TypeOf(v)); ok {
				return fmt.Errorf("config: unknown key %q (known: %s)", key, strings.Join(known, ", "))
			}
		}
		return configError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("config: unexpected data after the JSON object")
	}
	return nil
}

func configError(err error) error {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ):
		key := "config"
		if typ.Field != "" {
			key += "." + typ.Field
		}
		return fmt.Errorf("%s: want %s, got %s", key, typeName(typ.Type.Kind().String()), typ.Value)
	case errors.As(err, &syn):
		return fmt.Errorf("config: invalid JSON at byte %d: %v", syn.Offset, syn)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("config: unknown key %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return fmt.Errorf("config: %w", err)
}

// typeName says a Go kind the way a YAML author thinks of it.
func typeName(kind string) string {
	switch kind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "a list"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	case "bool":
		return "true or false"
	}
	return kind
}

// unknownKey finds the key of raw that names no field of t, as the JSON
// decoder matches them (case-insensitively, through embedded structs), with
// its path ("retry.maxx") and the keys t takes at that level, sorted: so a
// misspelt key is shown beside the one meant, as notifyd's own config does.
func unknownKey(raw []byte, t reflect.Type) (string, []string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", nil, false
	}
	return unknownIn(v, t, "")
}

func unknownIn(v any, t reflect.Type, path string) (string, []string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch val := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t, nil)
			for _, k := range keys {
				f, ok := matchField(fields, k)
				if !ok {
					names := make([]string, 0, len(fields))
					for name := range fields {
						names = append(names, name)
					}
					sort.Strings(names)
					return join(k), names, true
				}
				if key, known, ok := unknownIn(val[k], f, join(k)); ok {
					return key, known, true
				}
			}
		case reflect.Map:
			for _, k := range keys {
				if key, known, ok := unknownIn(val[k], t.Elem(), join(k)); ok {
					return key, known, true
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range val {
				if key, known, ok := unknownIn(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); ok {
					return key, known, true
				}
			}
		}
	}
	return "", nil, false
}

// jsonFields are the JSON names of t's fields (embedded structs' promoted)
// and their types.
func jsonFields(t reflect.Type, into map[string]reflect.Type) map[string]reflect.Type {
	if into == nil {
		into = map[string]reflect.Type{}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
			jsonFields(ft, into)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		into[tag] = f.Type
	}
	return into
}

// matchField finds key among fields as encoding/json does: exactly, else
// ignoring case.
func matchField(fields map[string]reflect.Type, key string) (reflect.Type, bool) {
	if t, ok := fields[key]; ok {
		return t, true
	}
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return t, true
		}
	}
	return nil, false
}
