package api_test

import (
	"strings"
	"testing"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/api"
	"github.com/notifyd/notifyd/sdk/wire"
)

// concrete turns a route pattern into a method and a path to request.
func concrete(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	path = strings.NewReplacer("{id}", "1", "{name}", "daily").Replace(path)
	return method, path
}

func bodyFor(method string) string {
	if method == "POST" || method == "PUT" {
		return "{}"
	}
	return ""
}

func TestServer_Auth(t *testing.T) {
	t.Parallel()
	// Every route gets several bad tokens from one address: past the throttle.
	b := setup(t, setupOptions{edit: func(c *config.Config) {
		c.HTTP.AuthFailuresPerMinute = 1000
		ch := c.Channels["orders"]
		ch.Callback = config.Callback{Secret: "cb-secret-0123456789abcdef", Header: config.DefaultCallbackHeader, MaxBodyBytes: 1024}
		c.Channels["orders"] = ch
	}})
	for _, pattern := range api.Routes() {
		method, path := concrete(pattern)
		body := bodyFor(method)
		protected := strings.HasPrefix(path, "/v1/") || path == "/metrics"
		t.Run(pattern, func(t *testing.T) {
			if pattern == "POST /v1/channels/{name}/callback" {
				// A partner's route: its channel's secret, never an
				// operator's token (callback_test.go tests the secret).
				for _, h := range []string{"", "Bearer " + tokenA, "Bearer token-x-0123456789abcdef"} {
					wantError(t, b.doAuth(method, "/v1/channels/orders/callback", h, body), 401, wire.CodeUnauthorized, config.DefaultCallbackHeader)
					wantError(t, b.doAuth(method, "/v1/channels/alerts/callback", h, body), 404, wire.CodeNotFound, "takes no callbacks")
				}
				return
			}
			if !protected {
				if a := b.doAuth(method, path, "", body); a.status == 401 {
					t.Errorf("open route answered 401 without a token: %s", a.body)
				}
				return
			}
			for _, bad := range []struct{ name, header, mention string }{
				{"no header", "", "missing Authorization"},
				{"wrong token", "Bearer token-x-0123456789abcdef", "not one of http.tokens"},
				{"a prefix of a token", "Bearer " + tokenA[:len(tokenA)-1], "not one of http.tokens"},
				{"a token with more after it", "Bearer " + tokenA + "x", "not one of http.tokens"},
				{"basic auth", "Basic dXNlcjpwYXNz", "Bearer"},
				{"bearer without a token", "Bearer ", "Bearer"},
			} {
				a := b.doAuth(method, path, bad.header, body)
				wantError(t, a, 401, wire.CodeUnauthorized, bad.mention)
				if got := a.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("%s: WWW-Authenticate %q, want Bearer", bad.name, got)
				}
			}
			for _, good := range []string{"Bearer " + tokenA, "Bearer " + tokenB, "bearer " + tokenB} {
				if a := b.doAuth(method, path, good, body); a.status == 401 {
					t.Errorf("%q refused: %s", good, a.body)
				}
			}
		})
	}
}

func TestServer_AuthPublicMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{edit: func(c *config.Config) { c.HTTP.PublicMetrics = true }})
	a := wantStatus(t, b.doAuth("GET", "/metrics", "", ""), 200)
	if !strings.Contains(string(a.body), "notifyd_build_info") {
		t.Errorf("/metrics without a token does not serve the metrics:\n%.300s", a.body)
	}
	// /v1 still needs a token.
	wantError(t, b.doAuth("GET", "/v1/channels", "", ""), 401, wire.CodeUnauthorized)
}

// TestServer_AuthNoTokens: with http.tokens empty every /v1 request is
// refused, whatever it presents; health stays open.
func TestServer_AuthNoTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{edit: func(c *config.Config) { c.HTTP.Tokens = nil }})
	wantError(t, b.do("GET", "/v1/channels", ""), 401, wire.CodeUnauthorized, "no API tokens")
	wantError(t, b.doAuth("GET", "/v1/channels", "Bearer ", ""), 401, wire.CodeUnauthorized)
	wantError(t, b.do("GET", "/metrics", ""), 401, wire.CodeUnauthorized)
	wantStatus(t, b.doAuth("GET", "/healthz", "", ""), 200)
}

// TestServer_AuthEmptyTokenNeverMatches: an empty entry in http.tokens (an
// unset ${VAR} that slipped past validation) must not let "" in.
func TestServer_AuthEmptyTokenNeverMatches(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{edit: func(c *config.Config) { c.HTTP.Tokens = []string{""} }})
	for _, h := range []string{"", "Bearer", "Bearer ", "Bearer  "} {
		wantError(t, b.doAuth("GET", "/v1/channels", h, ""), 401, wire.CodeUnauthorized)
	}
}
