package wire

import (
	"reflect"
	"strings"
)

// Fields finds the type of the struct field encoding/json fills with a
// member of a given name, each struct's fields looked up once: what the
// API's and the client's scans of a JSON text, which count what decoding
// would build before it builds it, follow. The zero Fields is ready to use;
// it is not safe for concurrent use.
type Fields struct {
	m map[reflect.Type][]field
}

// field is a struct field as encoding/json fills it: by its json name.
type field struct {
	name string
	typ  reflect.Type
}

// Of is the type of the field of struct t that encoding/json fills with the
// member name: its json name exactly, else one that matches it whatever the
// case; nil for none.
func (c *Fields) Of(t reflect.Type, name string) reflect.Type {
	fs, ok := c.m[t]
	if !ok {
		for _, f := range reflect.VisibleFields(t) {
			if !f.IsExported() || (f.Anonymous && f.Type.Kind() == reflect.Struct) {
				continue
			}
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case tag == "-":
				continue
			case tag == "":
				tag = f.Name
			}
			fs = append(fs, field{tag, f.Type})
		}
		if c.m == nil {
			c.m = map[reflect.Type][]field{}
		}
		c.m[t] = fs
	}
	var folded reflect.Type
	for _, f := range fs {
		if f.name == name {
			return f.typ
		}
		if folded == nil && strings.EqualFold(f.name, name) {
			folded = f.typ
		}
	}
	return folded
}
