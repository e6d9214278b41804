package wire

import (
	"encoding/json"
	"testing"
)

// FuzzAppendJSONString checks the hand-written escaper against encoding/json.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `"q"`, `\`, "\n\r\t\b\f", "\x00\x1f\x7f", "\u2028\u2029", "\xff\xfe", "é😀", "a\xc3", "é한😀", "bad \xff utf8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendJSONString(nil, s)
		var decoded string
		if err := json.Unmarshal(got, &decoded); err != nil {
			t.Fatalf("AppendJSONString(%q) = %q, not a JSON string: %v", s, got, err)
		}
		ref, _ := json.Marshal(s)
		var want string
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if decoded != want {
			t.Errorf("AppendJSONString(%q) decodes to %q; encoding/json gives %q", s, decoded, want)
		}
	})
}
