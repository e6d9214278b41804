package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

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

// No client can starve the listener: one holding more idle keep-alive
// connections than http.max_connections_per_client and than
// http.max_connections does not keep another client, /healthz or /readyz
// out. Its idle connections are closed to admit the new ones.
func TestServer_ConnectionsCannotBeStarved(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	cfg := *b.cfg
	cfg.HTTP.Listen, cfg.HTTP.MaxConnections, cfg.HTTP.MaxConnectionsPerClient = "127.0.0.1:0", 8, 4
	// The engine is not started, so every channel is stopped; this test is
	// about the door, so /readyz answers 200 all the same.
	cfg.HTTP.ReadyWithStoppedChannels = true
	srv := newServer(t, serverOptions{Config: &cfg, Store: b.store, Engine: b.engine, Redis: b.rds.Client})
	must(t, srv.Start(context.Background()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	addr := srv.Addr().String()

	// The hog, 127.0.0.1: 12 connections that each made a request and stay
	// open for more (idle keep-alive), and 4 that never send anything.
	var hog []net.Conn
	for i := range 16 {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		t.Cleanup(func() { c.Close() })
		hog = append(hog, c)
		if i < 12 {
			_, err = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			must(t, err)
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}
	}
	// Another client: 127.0.0.2 is loopback too, a different address.
	other := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}
	get := func(c *http.Client, path string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+tokenA)
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s while a client holds every connection: %v", path, err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s while a client holds every connection: %d, want 200", path, res.StatusCode)
		}
	}
	get(other, "/v1/channels")
	same := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get(same, "/healthz")
	get(same, "/readyz")

	// The hog keeps at most its share: the rest of its connections were
	// closed (a read sees EOF) to admit the others.
	deadline := time.Now().Add(30 * time.Second)
	for {
		open := 0
		for _, c := range hog {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				open++ // timed out: still open
			}
		}
		if open <= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hog still holds %d connections, want at most 4 (http.max_connections_per_client)", open)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
