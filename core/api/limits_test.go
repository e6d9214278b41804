package api_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/core/api"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Bad bearer tokens from one client are throttled: past
// http.auth_failures_per_minute its failing requests get 429 with
// Retry-After until the minute ends. A valid token from the same address
// (loopback here: everyone's address on the host) is served at once: the
// throttle limits failures, never the right credential.
func TestServer_BadTokenThrottle(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	for i := range 10 {
		wantStatus(t, b.doAuth("GET", "/v1/channels", "Bearer guess-"+strings.Repeat("x", i+16), ""), 401)
	}
	a := b.doAuth("GET", "/v1/channels", "Bearer guess-again-0123456789", "")
	wantError(t, a, 429, wire.CodeTooManyRequests, "too many requests with a bad token")
	if a.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	for _, good := range []string{tokenA, tokenB} {
		wantStatus(t, b.doAuth("GET", "/v1/channels", "Bearer "+good, ""), 200)
	}
	// Still throttled after the right token was served: it resets nothing.
	wantError(t, b.doAuth("GET", "/v1/channels", "Bearer guess-once-more-0123456789", ""), 429, wire.CodeTooManyRequests)
	// A request without credentials is not a guess: a prober is not throttled by it.
	wantStatus(t, b.doAuth("GET", "/healthz", "", ""), 200)
	wantError(t, b.doAuth("GET", "/v1/channels", "", ""), 401, wire.CodeUnauthorized)
}

// http.max_connections caps open connections: past it, a new connection
// waits for one to close instead of being served.
func TestServer_MaxConnections(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	cfg := *b.cfg
	cfg.HTTP.Listen, cfg.HTTP.MaxConnections = "127.0.0.1:0", 2
	srv := newServer(t, api.Options{Config: &cfg, Store: b.store, Engine: b.engine, Redis: b.rds.Client})
	must(t, srv.Start(context.Background()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	addr := srv.Addr().String()

	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		held = append(held, c)
	}
	// Let the server accept both before the third arrives.
	time.Sleep(100 * time.Millisecond)
	quick := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	if res, err := quick.Get("http://" + addr + "/healthz"); err == nil {
		res.Body.Close()
		t.Fatalf("a third connection was served (%d) while 2 of max 2 were open", res.StatusCode)
	}
	held[0].Close()
	patient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := patient.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("after one closed: %v, want served", err)
	}
	res.Body.Close()
	held[1].Close()
}
