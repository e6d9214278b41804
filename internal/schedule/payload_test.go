package schedule

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func renderOne(t *testing.T, payload map[string]any, recipient string, data string) (string, error) {
	t.Helper()
	p, err := compilePayload(payload)
	if err != nil {
		t.Fatalf("compilePayload: %v", err)
	}
	vars := newVars(time.Date(2024, 3, 10, 8, 0, 0, 0, time.UTC), "daily-quiz")
	vars[varRecipient] = recipient
	if vars[varData], err = decodeData([]byte(data)); err != nil {
		t.Fatalf("decodeData: %v", err)
	}
	out, err := p.render(nil, vars, 256<<10)
	return string(out), err
}

func TestPayloadTemplate_render(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload map[string]any
		data    string
		want    string // JSON, compared semantically
	}{
		{"static", map[string]any{"object_type": "text", "text": "hi", "n": 3, "ok": true, "x": nil},
			`{}`, `{"object_type":"text","text":"hi","n":3,"ok":true,"x":null}`},
		{"fields (fast path)", map[string]any{"text": "Quiz for {{.recipient}}: {{.data.title}} #{{.data.n}}"},
			`{"title":"Cats","n":1000000}`, `{"text":"Quiz for u-1: Cats #1000000"}`},
		{"nested and arrays", map[string]any{"a": map[string]any{"b": []any{"{{.schedule}}", 1, map[string]any{"c": "{{.data.x.y}}"}}}},
			`{"x":{"y":"deep"}}`, `{"a":{"b":["daily-quiz",1,{"c":"deep"}]}}`},
		{"methods and funcs (text/template path)", map[string]any{"t": `{{.fire_time.Format "2006-01-02 15:04"}} {{printf "%05d" 42}} {{.data.ok}}`},
			`{"ok":true}`, `{"t":"2024-03-10 08:00 00042 true"}`},
		{"optional field via index", map[string]any{"t": `[{{with index .data "missing"}}{{.}}{{end}}]`},
			`{}`, `{"t":"[]"}`},
		{"escaping", map[string]any{"t": "{{.data.s}}"},
			`{"s":"quote \" backslash \\ newline \n tab \t bell \u0007 <b>&amp; 한국어 😀"}`,
			`{"t":"quote \" backslash \\ newline \n tab \t bell \u0007 <b>&amp; 한국어 😀"}`},
		{"keys are not templates", map[string]any{"{{.recipient}}": "v"}, `{}`, `{"{{.recipient}}":"v"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := renderOne(t, tt.payload, "u-1", tt.data)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			var g, w any
			if err := json.Unmarshal([]byte(got), &g); err != nil {
				t.Fatalf("render produced invalid JSON %s: %v", got, err)
			}
			if err := json.Unmarshal([]byte(tt.want), &w); err != nil {
				t.Fatal(err)
			}
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			if string(gj) != string(wj) {
				t.Errorf("render = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPayloadTemplate_renderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data string
		want       []string
	}{
		{"missing key", `{"other":1}`, []string{"buttons[1].label", `"u-1"`, `map has no entry for key "title"`}},
		{"data not an object", `[1]`, []string{"buttons[1].label", "title"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderOne(t, map[string]any{"buttons": []any{"ok", map[string]any{"label": "{{.data.title}}"}}}, "u-1", tt.data)
			if err == nil {
				t.Fatal("render succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCompilePayload_errors(t *testing.T) {
	t.Parallel()
	if _, err := compilePayload(nil); err == nil {
		t.Error("compilePayload(nil) succeeded, want payload is empty")
	}
	_, err := compilePayload(map[string]any{"a": map[string]any{"b": "{{.recipient"}})
	if err == nil || !strings.Contains(err.Error(), "payload a.b") {
		t.Errorf("compilePayload(bad template) = %v, want an error naming a.b", err)
	}
}

func TestMentionsData(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		"{{.recipient}}":                      false,
		"{{.schedule}} {{.fire_time.Year}}":   false,
		"{{.data.title}}":                     true,
		"{{$.data.title}}":                    true,
		"{{index . \"data\"}}":                true,
		"{{with .data}}{{.x}}{{end}}":         true,
		"{{if .recipient}}{{.data.x}}{{end}}": true,
		"{{$x := .recipient}}{{$x}}":          true, // a variable: conservatively yes
	}
	for src, want := range tests {
		p, err := compilePayload(map[string]any{"t": src})
		if err != nil {
			t.Fatal(err)
		}
		if p.usesData != want {
			t.Errorf("usesData(%q) = %v, want %v", src, p.usesData, want)
		}
	}
}
