package api_test

import (
	"runtime"
	"strings"
	"testing"
)

// The check for NUL characters in a decoded request (nulField) walks every
// value of a free-form map (subscriber attributes, a campaign's payload
// template). It used to build each value's JSON path eagerly, copying the
// whole path of its parent at every level and for every array element:
// under a 400 KB key, 2,000 levels of nesting held 2,000 copies of the key
// at once (800 MB, live), and 10,000 array elements made 10,000 copies (4 GB
// allocated), for one request within http.max_body_bytes. The walk's cost
// must be linear in the body: here, well under 100 MiB allocated for a
// 420 KB request, whatever its shape. Not parallel: it reads the process's
// allocation counter.
func TestServer_NulFieldPathIsLinear(t *testing.T) {
	b := setup(t, setupOptions{})
	key := strings.Repeat("k", 400<<10)
	deep := `{"attributes":{"` + key + `":` + strings.Repeat(`{"a":`, 2000) + `1` + strings.Repeat("}", 2000) + `}}`
	wide := `{"channel":"orders","audience":{"topic":"news"},"payload":{"` + key + `":[` +
		strings.TrimSuffix(strings.Repeat("1,", 10000), ",") + `]}}`
	for _, tc := range []struct {
		name, method, path, body string
	}{
		{"subscriber attributes 2,000 deep under a 400 KB key", "PUT", "/v1/subscribers/deep", deep},
		{"campaign payload with 10,000 elements under a 400 KB key", "POST", "/v1/campaigns", wide},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			a := b.do(tc.method, tc.path, tc.body)
			runtime.ReadMemStats(&after)
			if a.status/100 != 4 && a.status/100 != 2 {
				t.Fatalf("status %d: %.300s", a.status, a.body)
			}
			const bound = 100 << 20
			if got := after.TotalAlloc - before.TotalAlloc; got > bound {
				t.Fatalf("one %d-byte request allocated %d MiB (answer %d), want at most %d MiB: the NUL check's cost is not linear in the body",
					len(tc.body), got>>20, a.status, bound>>20)
			}
		})
	}
}

// An error answer quotes the value at fault, and quoting escapes it: a
// channel of DEL characters (1 byte each in the body, \x7f once quoted, \\x7f
// once in JSON) made a 1 MiB request answer 5 MiB, built in memory three
// times over (the quote, the JSON, the write), for every such request in
// flight, past the bound http.max_inflight_body_bytes puts on bodies. Every
// error message is cut to a bound of its own.
func TestServer_ErrorAnswerBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	for _, tc := range []struct{ name, method, path, body string }{
		{"an enqueue's channel", "POST", "/v1/notifications",
			`{"channel":"` + strings.Repeat("\x7f", 1<<20-100) + `","recipient":"r","payload":{}}`},
		{"a subscriber's external_id", "PUT", "/v1/subscribers/x",
			`{"external_id":"` + strings.Repeat("\x7f", 1<<20-100) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := b.do(tc.method, tc.path, tc.body)
			if a.status != 422 && a.status != 400 {
				t.Fatalf("status %d, want 4xx: %.300s", a.status, a.body)
			}
			a.errBody(t)
			if len(a.body) > 64<<10 {
				t.Fatalf("a %d-byte request answered %d bytes: the error quotes it whole", len(tc.body), len(a.body))
			}
		})
	}
}
