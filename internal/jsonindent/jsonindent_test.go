package jsonindent_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/jsonindent"
)

// Size is at least json.Indent's length on JSON without whitespace, strings
// with brackets, commas, colons and escaped quotes included.
func TestSize(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{}`, `[]`, `1`, `"a"`,
		`{"a":[1,2,{"b":"x,y:[z]\"}"}],"c":{}}`,
		`[[[[1]],[2,3]],{"k":[{"v":null}]}]`,
	} {
		var b bytes.Buffer
		if err := json.Indent(&b, []byte(raw), "", jsonindent.Indent); err != nil {
			t.Fatal(err)
		}
		if got := jsonindent.Size([]byte(raw), 1<<30); got < b.Len() {
			t.Errorf("Size(%s) = %d, want at least json.Indent's %d", raw, got, b.Len())
		}
	}
}

// Fits refuses what grows with the square of the nesting, and stops
// counting at its bound.
func TestFits(t *testing.T) {
	t.Parallel()
	if !jsonindent.Fits([]byte(`{"a":[1,2,3],"b":{"c":"d"}}`)) {
		t.Errorf("an ordinary document does not fit")
	}
	deep := []byte(strings.Repeat("[", 9000) + strings.Repeat("]", 9000))
	if jsonindent.Fits(deep) {
		t.Errorf("arrays 9,000 deep fit (indented they are %d bytes)", jsonindent.Size(deep, 1<<62))
	}
}
