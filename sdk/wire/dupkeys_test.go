package wire

import (
	"reflect"
	"testing"
)

// RepeatedKey names the first key given twice and where it is, below the
// name given to the value; keys fill a struct's fields case-insensitively,
// and are compared exactly anywhere free-form. The API's doors are tested
// through their decoders (internal/api TestDecode_RepeatedKey).
func TestRepeatedKey(t *testing.T) {
	type body struct {
		Channel string            `json:"channel"`
		Payload map[string]any    `json:"payload"`
		Tags    map[string]string `json:"tags"`
	}
	for _, tc := range []struct {
		doc  string
		t    reflect.Type
		name string
		want string // "" when every key is given once
	}{
		{`{"text":"a","text":"b"}`, nil, "payload", `payload: key "text" is given twice; give each key once`},
		{`{"text":"a","text":"b"}`, nil, "", `key "text" is given twice; give each key once`},
		{`{"m":[{"x":1},{"y":{"k":1,"\u006b":2}}]}`, nil, "payload", `payload.m[1].y: key "k" is given twice; give each key once`},
		{`[0,{"a":1,"a":2}]`, nil, "payload", `payload[1]: key "a" is given twice; give each key once`},
		{`{"a":1,"A":2,"n":{"a":1},"l":[{"a":1},{"a":2}]}`, nil, "payload", ""},
		{`{"channel":"a","Channel":"b"}`, reflect.TypeFor[body](), "", `key "Channel" repeats "channel" (field names match whatever their case); give each key once`},
		{`{"payload":{"a":1,"A":2},"tags":{"x":"1","X":"2"}}`, reflect.TypeFor[*body](), "", ""},
		{`{"tags":{"x":"1","x":"2"}}`, reflect.TypeFor[body](), "", `tags: key "x" is given twice; give each key once`},
		{`"text"`, nil, "payload", ""},
	} {
		got := ""
		if k := RepeatedKey([]byte(tc.doc), tc.t, tc.name); k != nil {
			got = k.Error()
		}
		if got != tc.want {
			t.Errorf("RepeatedKey(%s, %v, %q) = %q, want %q", tc.doc, tc.t, tc.name, got, tc.want)
		}
	}
}
