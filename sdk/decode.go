package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Decode unmarshals the channel's config into v strictly: an unknown key, a
// value of the wrong type or trailing data is an error that names the key,
// in words an operator can act on ("config.url: want string, got number").
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
