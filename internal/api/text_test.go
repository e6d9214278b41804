package api_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/api"
)

// TestServer_HostileText: NUL bytes and invalid UTF-8 in every place a
// request carries text — path parameters, query strings, JSON bodies — get a
// 4xx that says what was wrong, never a 500 or Postgres' SQLSTATE text. The
// routes come from the API's own table, so a new route is covered too.
func TestServer_HostileText(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	bad := map[string]string{"NUL": "%00", "invalid UTF-8": "%FF%FE", "overlong NUL": "%C0%80"}
	// Bodies per route, with X where the bad text goes.
	bodies := map[string]string{
		"POST /v1/notifications":         `{"channel":"orders","recipient":"rX","payload":{"t":"X"}}`,
		"POST /v1/dlq/replay":            `{"channel":"ordersX"}`,
		"POST /v1/dlq/purge":             `{"channel":"ordersX"}`,
		"PUT /v1/subscribers/{id}":       `{"addresses":{"orders":"aX"},"attributes":{"kX":"X"}}`,
		"POST /v1/campaigns":             `{"channel":"orders","audience":{"topic":"news"},"payload":{"t":"X"}}`,
		"POST /v1/channels/{name}/pause": `{"reason":"X"}`,
	}
	badText := map[string]string{"invalid UTF-8": "\xff\xfe", `\u0000`: `\u0000`, "a lone surrogate": `\ud800`}
	for _, route := range api.Routes() {
		method, pattern, _ := strings.Cut(route, " ")
		if pattern == "/metrics" || pattern == "/healthz" || pattern == "/readyz" {
			continue
		}
		for what, esc := range bad {
			// Every path parameter, then a query parameter.
			paths := []string{}
			if strings.Contains(pattern, "{") {
				p := pattern
				for _, param := range []string{"{id}", "{name}"} {
					p = strings.ReplaceAll(p, param, "x"+esc+"y")
				}
				paths = append(paths, p)
			}
			for _, q := range []string{"channel", "after", "state", "limit", "x" + esc} {
				paths = append(paths, strings.NewReplacer("{id}", "1", "{name}", "orders").Replace(pattern)+"?"+q+"=v"+esc)
			}
			for _, path := range paths {
				t.Run(fmt.Sprintf("%s %s (%s)", method, path, what), func(t *testing.T) {
					check(t, b.do(method, path, `{"channel":"orders","recipient":"r","payload":{}}`))
				})
			}
		}
		body, ok := bodies[route]
		if !ok {
			continue
		}
		path := strings.NewReplacer("{id}", "sub-1", "{name}", "orders").Replace(pattern)
		for what, x := range badText {
			t.Run(fmt.Sprintf("%s %s (body: %s)", method, path, what), func(t *testing.T) {
				a := b.do(method, path, strings.ReplaceAll(body, "X", x))
				check(t, a)
				// Refused, never stored rewritten.
				if a.status < 400 || a.status >= 500 {
					t.Errorf("status %d, want 4xx for a body it cannot store as sent; body: %s", a.status, a.body)
				}
			})
		}
	}
	t.Run("deep attributes", func(t *testing.T) {
		a := b.do("PUT", "/v1/subscribers/deep", `{"attributes":`+strings.Repeat(`{"a":`, 40)+`1`+strings.Repeat(`}`, 40)+`}`)
		wantError(t, a, 422, "invalid", "nest deeper than 32")
	})
	t.Run("a 10 KB address", func(t *testing.T) {
		a := b.do("PUT", "/v1/subscribers/long", `{"addresses":{"orders":"`+strings.Repeat("a", 10_000)+`"}}`)
		wantError(t, a, 422, "invalid", "address for channel", "at most 1024")
	})
	t.Run("a 3,200-byte recipient", func(t *testing.T) {
		a := b.do("POST", "/v1/notifications", `{"channel":"orders","recipient":"`+strings.Repeat("r", 3200)+`","payload":{}}`)
		wantError(t, a, 422, "invalid", "recipient", "at most 1024")
	})
}

// check: a 4xx whose JSON error names the problem, with no SQLSTATE text.
func check(t *testing.T, a answer) {
	t.Helper()
	if a.status < 400 || a.status >= 500 {
		if a.status >= 500 {
			t.Fatalf("status %d, want 4xx; body: %s", a.status, a.body)
		}
		return // a route that ignores the odd part (an unknown query parameter) may succeed
	}
	if strings.Contains(string(a.body), "SQLSTATE") {
		t.Errorf("body leaks database text: %s", a.body)
	}
	a.errBody(t)
}

// A query string net/url cannot read whole — a `;` between parameters
// (not a separator since Go 1.17), an escape that is not one, more than
// 10,000 parameters — was read as no query at all, or without the part at
// fault: GET /v1/dlq?channel=alerts;limit=5 listed every channel's dead
// letters as if unfiltered, and a NUL or a negative limit among 10,001
// parameters was never seen. Such a request is refused, naming the query.
func TestServer_UnreadableQuery(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	b.deadLetter("orders", "a")
	for _, q := range []string{
		"channel=alerts;limit=5",
		"limit=5&channel=alerts%zz",
		"channel=%00&limit=-5" + strings.Repeat("&x=1", 10_001),
	} {
		t.Run(fmt.Sprintf("%.40s", q), func(t *testing.T) {
			wantError(t, b.do("GET", "/v1/dlq?"+q, ""), 400, "bad_request", "query string")
		})
	}
	t.Run("a query that reads", func(t *testing.T) {
		wantStatus(t, b.do("GET", "/v1/dlq?channel=alerts&limit=5", ""), 200)
	})
}

// A compressed request body (Content-Encoding: gzip) was read as JSON as it
// came: the answer said `request body is not valid UTF-8 (byte 1)`, naming
// the bytes of the gzip header instead of the encoding. It is refused
// naming Content-Encoding, whatever the route; nothing is decompressed, so
// a body's bound stays its size on the wire.
func TestServer_CompressedBodyNamed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = io.WriteString(w, `{"channel":"orders","recipient":"r","payload":{}}`)
	must(t, w.Close())
	for _, path := range []string{"/v1/notifications", "/v1/dlq/purge", "/v1/campaigns"} {
		req, err := http.NewRequestWithContext(b.ctx, "POST", b.url+path, bytes.NewReader(gz.Bytes()))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+tokenA)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		res, err := http.DefaultClient.Do(req)
		must(t, err)
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		wantError(t, answer{status: res.StatusCode, header: res.Header, body: raw}, 400, "bad_request", "Content-Encoding", "gzip")
	}
}
