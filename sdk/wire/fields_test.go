package wire

import (
	"reflect"
	"testing"
)

func TestFields_Of(t *testing.T) {
	type inner struct {
		Deep int `json:"deep"`
	}
	type s struct {
		inner
		Name    string `json:"name"`
		NAME    int    `json:"NAME"`
		Skipped string `json:"-"`
		Plain   bool
		hidden  int
	}
	var f Fields
	typ := reflect.TypeFor[s]()
	for _, c := range []struct {
		name string
		want reflect.Type
	}{
		{"name", reflect.TypeFor[string]()}, // exact wins over a case-folded match
		{"NAME", reflect.TypeFor[int]()},
		{"Name", reflect.TypeFor[string]()}, // folded: the first in field order
		{"plain", reflect.TypeFor[bool]()},
		{"deep", reflect.TypeFor[int]()}, // promoted from an embedded struct
		{"-", nil}, {"Skipped", nil}, {"hidden", nil}, {"nope", nil},
	} {
		if got := f.Of(typ, c.name); got != c.want {
			t.Errorf("Of(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}
