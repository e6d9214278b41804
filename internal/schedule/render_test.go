package schedule

import (
	"errors"
	"fmt"
	"runtime/metrics"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/notifyd/notifyd/sdk/wire"
)

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

// chainBomb is the probe's campaign template (issue 26): a 10-byte string,
// then levels variables each built by fn from ten of the previous one, then
// the last one's length. No range, no output: 8 levels build 1 GB, 7 levels
// 100 MB.
func chainBomb(fn string, levels int) string {
	var b strings.Builder
	b.WriteString(`{{$v0 := "xxxxxxxxxx"}}`)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "{{$v%d := %s%s}}", i, fn, strings.Repeat(fmt.Sprintf(" $v%d", i-1), 10))
	}
	fmt.Fprintf(&b, "{{len $v%d}}", levels)
	return b.String()
}

// memoryBombs are templates that build far past the memory bound, each by
// a different function or path.
var memoryBombs = []struct{ name, tmpl string }{
	{"print ×10 a level to 1 GB", chainBomb("print", 8)},
	{"print, one level less: 100 MB", chainBomb("print", 7)},
	{"printf", chainBomb(`printf "%s%s%s%s%s%s%s%s%s%s"`, 8)},
	{"printf with a reused argument", `{{$v0 := "xxxxxxxxxx"}}{{$v1 := printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" $v0}}` +
		`{{$v2 := printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" $v1}}{{$v3 := printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" $v2}}` +
		`{{$v4 := printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" $v3}}{{$v5 := printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" $v4}}` +
		`{{$v6 := printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" $v5}}{{$v7 := printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" $v6}}{{len $v7}}`},
	{"println", chainBomb("println", 8)},
	{"html", chainBomb("html", 8)},
	{"js", chainBomb("js", 8)},
	{"urlquery", chainBomb("urlquery", 8)},
	{"a string doubled in a range", `{{$s := "xxxxxxxxxx"}}{{range 40}}{{$s = print $s $s}}{{end}}{{len $s}}`},
	{"nested define and template", `{{define "g"}}{{if lt (len .) 1000000000}}{{template "g" (print . . . . . . . . . .)}}{{else}}{{len .}}{{end}}{{end}}{{template "g" "xxxxxxxxxx"}}`},
	{"slice of a built string", `{{define "g"}}{{if lt (len .) 1000000000}}{{template "g" (slice (print . . . . . . . . . . .) 1)}}{{else}}{{len .}}{{end}}{{end}}{{template "g" "xxxxxxxxxx"}}`},
	{"a method given a large argument", `{{range 100000}}{{$x := $.fire_time.Format $.data.layout}}{{end}}`},
}

// largeAllocBytes is the bytes this process has allocated in objects past
// the largest size class (32 KiB): the strings a template builds, not the
// interpreter's own small garbage or goroutine stacks, which a loop or a
// deep recursion makes within their own bounds.
func largeAllocBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/allocs-by-size:bytes"}}
	metrics.Read(s)
	h := s[1].Value.Float64Histogram()
	var small float64
	for i, c := range h.Counts[:len(h.Counts)-1] { // the last bucket is every large object
		small += float64(c) * (h.Buckets[i+1] - 1)
	}
	return s[0].Value.Uint64() - uint64(small)
}

// TestRender_memoryBound: each bomb fails naming the memory bound, and the
// large objects one render allocated stay under 4× the bound (what fmt's
// buffer doubling and the final copy cost), where the 100 MB variant
// allocated hundreds of megabytes before. Not parallel: the measure is the
// process's.
func TestRender_memoryBound(t *testing.T) {
	const limit = 256 << 10 // renderOne's payload bound
	data := `{"layout":"` + strings.Repeat("2006", 10_000) + `"}`
	for _, bomb := range memoryBombs {
		before := largeAllocBytes()
		out, err := renderOne(t, map[string]any{"t": bomb.tmpl}, "r", data)
		grew := largeAllocBytes() - before
		if !errors.Is(err, errRenderBound) || !strings.Contains(err.Error(), "memory bound") {
			t.Errorf("%s: render = %.100s, %v; want an error naming the memory bound", bomb.name, out, err)
		}
		if budget := uint64(RenderMemoryFactor * limit); grew > 4*budget {
			t.Errorf("%s: one render allocated %d KiB in large objects, want under 4× the %d KiB bound", bomb.name, grew>>10, budget>>10)
		}
	}
}

// The wrapped functions print what text/template's own do.
func TestTemplateFuncs_sameOutput(t *testing.T) {
	t.Parallel()
	data := `{"l":["a","b"],"m":{"k":"v"},"s":"<a href='x'>&\"</a>","n":42}`
	for _, tmpl := range []string{
		`{{print "a" 1 2 "b" .data.n}}`, `{{print .data.l .data.m}}`, `{{print}}`, `{{println "a" "b" 3}}`, `{{println}}`,
		`{{printf "%05d|%q|%v|%x|%[1]d" 42 .data.s .data.l "hi"}}`, `{{printf "%d %d" 1}}`, `{{printf "%s" 1 2}}`, `{{printf "%.3f" 3.14159}}`,
		`{{html .data.s}}`, `{{html 1 "<" .data.l}}`, `{{js .data.s}}`, `{{js "\u2028" 2}}`, `{{urlquery .data.s "a b"}}`,
		`{{.data.s | html | js | urlquery}}`, `{{index .data.l 1}}{{slice .data.s 1 3}}{{len .data.m}}`,
		`{{.fire_time.Format "2006-01-02"}} {{"15:04" | .fire_time.Format}} {{(.fire_time.Add 3600000000000).Hour}}`,
		`{{with $t := .fire_time}}{{$t.Format "Jan"}}{{end}}`,
	} {
		got, err := renderOne(t, map[string]any{"t": tmpl}, "r", data)
		if err != nil {
			t.Errorf("%s: %v", tmpl, err)
			continue
		}
		plain := template.Must(template.New("t").Option("missingkey=error").Parse(tmpl))
		vars := newVars(time.Date(2024, 3, 10, 8, 0, 0, 0, time.UTC), "daily-quiz")
		vars[varData], _ = decodeData([]byte(data))
		var want strings.Builder
		if err := plain.Execute(&want, vars); err != nil {
			t.Fatalf("%s: text/template: %v", tmpl, err)
		}
		if w := string(wire.AppendJSONString([]byte(`{"t":`), want.String())) + "}"; got != w {
			t.Errorf("%s = %s, want %s", tmpl, got, w)
		}
	}
}

// compile refuses a function that is not in templateFuncList: call (no
// value a template sees is a function) and the names the bounds add.
func TestCompilePayload_refusesUnlistedFuncs(t *testing.T) {
	t.Parallel()
	for tmpl, want := range map[string]string{
		`{{call .data.f}}`:                     `function "call" is not allowed`,
		`{{if true}}{{call .f 1}}{{end}}`:      `function "call" is not allowed`,
		`{{notifydStep 1}}`:                    `function "notifydStep" is not allowed`,
		`{{notifydBuilt "x"}}`:                 `function "notifydBuilt" is not allowed`,
		`{{define "a"}}{{(call .f).X}}{{end}}`: `function "call" is not allowed`,
	} {
		_, err := compilePayload(map[string]any{"t": tmpl})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "payload t") {
			t.Errorf("compilePayload(%s) = %v, want an error naming the leaf and %q", tmpl, err, want)
		}
	}
}

// TestRender_mapSortCounts: a range over a map sorts its keys before its
// first iteration, so a range that breaks at once still costs the sort. A
// map of 13,000 keys (120 KiB, within the data bound) ranged in a loop that breaks at once
// ran 2.4 s, past the 1 s render bound, its sorts counted as one step each
// and the clock read every 256 steps; counted by its keys, the render stops
// at the step bound after a few sorts (its clock too, when the machine is
// slow enough: either is a bound).
func TestRender_mapSortCounts(t *testing.T) {
	t.Parallel()
	var data strings.Builder
	data.WriteString(`{"m":{`)
	keys := 0
	for ; data.Len() < 120<<10; keys++ {
		if keys > 0 {
			data.WriteByte(',')
		}
		fmt.Fprintf(&data, `"%d":0`, keys)
	}
	data.WriteString(`}}`)

	// One range that breaks at once counts every key it sorted.
	p, err := compilePayload(map[string]any{"t": `{{range $k, $v := .data.m}}{{break}}{{end}}`})
	if err != nil {
		t.Fatal(err)
	}
	vars := newVars(time.Date(2024, 3, 10, 8, 0, 0, 0, time.UTC), "daily-quiz")
	if vars[varData], err = decodeData([]byte(data.String())); err != nil {
		t.Fatal(err)
	}
	if _, err := p.render(nil, vars, 256<<10); err != nil {
		t.Fatal(err)
	}
	if got := p.budget.iterations; got < keys {
		t.Errorf("a range over %d keys that broke at once counted %d steps, want at least %d", keys, got, keys)
	}

	for _, tmpl := range []string{
		`{{range 100000}}{{range $k, $v := $.data.m}}{{break}}{{end}}{{end}}`,
		`{{range $.data.m}}{{range $.data.m}}{{break}}{{end}}{{end}}`,
	} {
		out, err := renderOne(t, map[string]any{"t": tmpl}, "r", data.String())
		if !errors.Is(err, errRenderBound) {
			t.Errorf("%s: render = %.100s, %v; want a render bound", tmpl, out, err)
		}
	}
	// A map within the bound renders as text/template's range does, in key order.
	out, err := renderOne(t, map[string]any{"t": `{{range $k, $v := .data.m}}{{$k}}={{$v}};{{end}}`}, "r", `{"m":{"b":2,"a":1,"c":3}}`)
	if want := `{"t":"a=1;b=2;c=3;"}`; err != nil || out != want {
		t.Errorf("render = %s, %v; want %s", out, err, want)
	}
}

// TestRender_fieldsOnlyTemplateBounded: a template of text and field
// lookups alone takes the fast path, which wrote every value into the
// leaf's buffer before the payload bound was checked at the leaf's end:
// 5,900 × {{.data.s}} (a 64 KiB template) over 60 KB attributes allocated
// 2 GB and held 1.5 GB for one recipient, 4 GB with the 128 KiB an
// audience query's data may be. The fast path's output is held to the
// bound as it is written, as text/template's is. Not parallel: the measure
// is the process's.
func TestRender_fieldsOnlyTemplateBounded(t *testing.T) {
	const limit = 256 << 10 // renderOne's payload bound
	data := `{"s":"` + strings.Repeat("x", 60_000) + `"}`
	for _, tmpl := range []string{
		strings.Repeat("{{.data.s}}", 1000),
		"x" + strings.Repeat("{{.data.s}}{{.recipient}}", 500),
	} {
		before := largeAllocBytes()
		out, err := renderOne(t, map[string]any{"t": tmpl}, "r", data)
		grew := largeAllocBytes() - before
		if !errors.Is(err, errRenderBound) || !strings.Contains(err.Error(), "payload bound") {
			t.Errorf("%.40s…: render = %.100s, %v; want an error naming the payload bound", tmpl, out, err)
		}
		if grew > 4*limit {
			t.Errorf("%.40s…: one render allocated %d KiB in large objects, want under 4× the %d KiB payload bound", tmpl, grew>>10, limit>>10)
		}
	}
	// Within the bound the fast path renders as before.
	out, err := renderOne(t, map[string]any{"t": strings.Repeat("{{.data.s}}", 4)}, "r", data)
	if want := 4*60_000 + len(`{"t":""}`); err != nil || len(out) != want {
		t.Errorf("4 × 60 KB = %d bytes, %v; want %d", len(out), err, want)
	}
}
