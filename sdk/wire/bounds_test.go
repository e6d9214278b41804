package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNumberChars(t *testing.T) {
	for _, tt := range []struct {
		lit  string
		want int // len of Postgres' numeric_out of the same literal
	}{
		{"0", 1}, {"-0", 2}, {"7", 1}, {"-12", 3}, {"1.5", 3}, {"1.50", 4},
		{"1e3", 4}, {"1E+3", 4}, {"1.5e1", 2}, {"1.25e1", 4}, {"1.5e-7", 10},
		{"0.001", 5}, {"0e5", 1}, {"0e-5", 7}, {"0.0e2", 1},
		{"1e21", 22}, {"1e100000", 100001}, {"-1e-16383", 16386},
		{"123456789012345678901234567890", 30},
	} {
		if got := numberChars([]byte(tt.lit)); got != tt.want {
			t.Errorf("numberChars(%s) = %d, want %d", tt.lit, got, tt.want)
		}
	}
}

func TestJSONReadBack(t *testing.T) {
	for _, tt := range []struct {
		doc, problem string
		size         int
	}{
		{`{"a":1,"b":[1,2]}`, "", len(`{"a": 1, "b": [1, 2]}`)},
		{` { "a" : "x y" } `, "", len(`{"a": "x y"}`)},
		{`{"a":"\"]:,"}`, "", len(`{"a": "\"]:,"}`)},
		{`{"a":[1e99]}`, "", len(`{"a": [1`) + 99 + 2},
		{`{"a":[1,{"b":1e100}]}`, "$.a[1].b (byte 13)", 0},
		{`{"x y":[0,0,1e-99]}`, `$["x y"][2] (byte 12)`, 0},
		{`[` + strings.Repeat(`1e100000,`, 20) + `1]`, "$[0] (byte 1)", 0},
		{`{"a\"b":{"c":[0,{"d":[1e100]}]}}`, `$["a\\\"b"].c[1].d[0] (byte 22)`, 0},
		{strings.Repeat(`{"k":`, 20) + `1e100` + strings.Repeat(`}`, 20), "$" + strings.Repeat(".k", 20) + " (byte 100)", 0},
	} {
		size, problem := JSONReadBack([]byte(tt.doc))
		switch {
		case tt.problem == "" && problem != "":
			t.Errorf("JSONReadBack(%.40s) problem %q, want none", tt.doc, problem)
		case tt.problem != "" && !strings.Contains(problem, tt.problem):
			t.Errorf("JSONReadBack(%.40s) problem %q, want it to name %s", tt.doc, problem, tt.problem)
		case tt.problem == "" && size != tt.size:
			t.Errorf("JSONReadBack(%s) size %d, want %d", tt.doc, size, tt.size)
		}
	}
}

// TestJSONReadBack_allocations: a payload without a problem is measured
// without allocating (it runs on every enqueue and every settled result).
// (CheckJSON is not held to 0 here: json.Valid takes its scanner from a
// sync.Pool, which the race detector empties at random.)
func TestJSONReadBack_allocations(t *testing.T) {
	doc := []byte(`{"title":"Daily quiz #1042","text":"Which planet has the most moons?","choices":["Jupiter","Saturn","Uranus","Neptune"],"link":"https://quiz.example/1042","meta":{"a":{"b":[{"c":1.5e3}]}}}`)
	if n := testing.AllocsPerRun(100, func() { JSONReadBack(doc) }); n != 0 {
		t.Errorf("JSONReadBack of a payload: %v allocations, want 0", n)
	}
}

func TestCheckPayload(t *testing.T) {
	for _, tt := range []struct {
		doc   string
		limit int
		want  string
	}{
		{`{"a":1}`, 100, ""},
		{`{"a":1e100000}`, 100, "reads back as 100001 characters, at most 100"},
		{`[1,1,1,1,1,1,1,1,1,1]`, 25, ""}, // 21 written, 30 read back: within MaxPayloadBytes
		{`[` + strings.Repeat(`1e99,`, 20000) + `1]`, 1 << 20, "reads back as 2040003 bytes, at most 1048576"},
		{`{"a":1,}`, 100, "is not valid JSON (at byte 8)"},
		{`{"a":"\u0000"}`, 100, `contains \u0000`},
		{strings.Repeat(" ", 200) + `{}`, 100, "is 202 bytes, at most 100"},
	} {
		err := CheckPayload([]byte(tt.doc), tt.limit)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckPayload(%.30s) = %v, want nil", tt.doc, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckPayload(%.30s) = %v, want %q", tt.doc, err, tt.want)
		}
	}
}

// FuzzJSONReadBack: any input is scanned without a panic; for valid JSON a
// problem is reported exactly when some number prints past MaxNumberChars,
// and the size counts at least every number's printed length. (That the size
// is never below Postgres' own output is TestJSONReadBack_postgres, in
// internal/outbox, against a real server.)
func FuzzJSONReadBack(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1e99,-0.5e-3,"x\"y"]`, `{"a":[1e100000]}`, `{"k":{"l":[true,null,""]}}`, `0e-5`, `"\u00e9"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		size, problem := JSONReadBack(b)
		if !json.Valid(b) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		over, sum := false, 0
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			if n, ok := tok.(json.Number); ok {
				c := numberChars([]byte(n))
				sum += c
				over = over || c > MaxNumberChars
			}
		}
		if over != (problem != "") {
			t.Fatalf("JSONReadBack(%q) problem %q, but a number past the bound: %v", b, problem, over)
		}
		if size < sum {
			t.Fatalf("JSONReadBack(%q) = %d, below its numbers' %d characters", b, size, sum)
		}
	})
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("Truncate(short) = %q", got)
	}
	long := strings.Repeat("가", 100) // 3 bytes a rune
	got := Truncate(long, 50)
	if len(got) > 50 || !utf8.ValidString(got) || !strings.HasSuffix(got, "[truncated]") {
		t.Errorf("Truncate = %q (%d bytes), want ≤ 50 valid UTF-8 bytes ending in the mark", got, len(got))
	}
}

// EscapeControls shows what a terminal would act on and leaves the rest:
// printed raw, OSC 52 wrote the operator's clipboard, \r overwrote a line.
func TestEscapeControls(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, é 한 \\x1b":             "plain text, é 한 \\x1b",
		"\x1b]52;c;Y3Vy\x07\x1b[2J\rFAKE\b": `\x1b]52;c;Y3Vy\a\x1b[2J\rFAKE\b`,
		"line\nnext\ttab":                   `line\nnext\ttab`,
		"del\x7f c1\u009b\u0085 nbsp\u00a0": `del\x7f c1\u009b\u0085 nbsp` + "\u00a0",
		"bad \xff\x9b utf-8":                `bad \xff\x9b utf-8`,
		"":                                  "",
	} {
		if got := EscapeControls(in); got != want {
			t.Errorf("EscapeControls(%q) = %q, want %q", in, got, want)
		}
	}
}
