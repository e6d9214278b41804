package schedule

import "testing"

// Bounding ranges must not change what a template prints.
func TestBoundRanges_sameOutput(t *testing.T) {
	t.Parallel()
	data := `{"e":[],"l":["a","b","c"],"m":{"y":"2","x":"1"},"n":3}`
	for tmpl, want := range map[string]string{
		`{{range .data.e}}x{{else}}empty{{end}}`:                                 "empty",
		`{{range .data.l}}{{.}}{{end}}`:                                          "abc",
		`{{range $i, $v := .data.l}}{{$i}}={{$v}};{{end}}`:                       "0=a;1=b;2=c;",
		`{{range .data.m}}{{.}}{{end}}`:                                          "12",
		`{{range $k, $v := .data.m}}{{$k}}{{$v}}{{end}}`:                         "x1y2",
		`{{range .data.l}}{{if eq . "b"}}{{break}}{{end}}{{.}}{{end}}`:           "a",
		`{{range .data.l}}{{if eq . "b"}}{{continue}}{{end}}{{.}}{{end}}`:        "ac",
		`{{range 3}}{{.}}{{end}}`:                                                "012",
		`{{define "u"}}[{{range .}}{{.}}{{end}}]{{end}}{{template "u" .data.l}}`: "[abc]",
	} {
		got, err := renderOne(t, map[string]any{"t": tmpl}, "r", data)
		if err != nil || got != `{"t":"`+want+`"}` {
			t.Errorf("%s = %s, %v; want %q", tmpl, got, err, want)
		}
	}
}
