package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
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

// Decoding builds Go values many times larger than the JSON naming them:
// `{}` is 2 bytes and a notification of the request 88, so a 1 MiB body of
// {"notifications":[{},{},…]} allocated 172 MiB (about 60 MB live) before
// its 1,000-notification bound was checked, and 16 such requests from one
// client, within its share of http.max_inflight_body_bytes, held 1 GiB.
// The body's values are counted before it is decoded: each request here is
// refused, naming where, within a small multiple of its own size, and a
// request at its fields' bounds is still served. Not parallel: it reads the
// process's allocation counter.
func TestServer_BodyValuesBoundedBeforeDecode(t *testing.T) {
	b := setup(t, setupOptions{})
	list := func(item string, n int) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }
	for _, tc := range []struct {
		name, method, path, body, mention string
	}{
		{"a batch of empty notifications", "POST", "/v1/notifications",
			`{"notifications":[` + list("{}", 340_000) + `]}`, "notifications"},
		{"DLQ ids", "POST", "/v1/dlq/purge", `{"ids":[` + list("1", 500_000) + `]}`, "ids"},
		{"a campaign template of empty objects", "POST", "/v1/campaigns",
			`{"channel":"orders","audience":{"topic":"news"},"payload":{"a":[` + list("{}", 340_000) + `]}}`, "payload.a"},
		{"attributes of small objects", "PUT", "/v1/subscribers/x",
			`{"attributes":{"a":[` + list(`{"k":1}`, 120_000) + `]}}`, "attributes.a"},
		{"subscriber topics", "PUT", "/v1/subscribers/x", `{"topics":[` + list(`""`, 300_000) + `]}`, "topics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.body) > int(b.cfg.HTTP.MaxBodyBytes) {
				t.Fatalf("the body is %d bytes, past http.max_body_bytes: the test would not reach the decoder", len(tc.body))
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			a := b.do(tc.method, tc.path, tc.body)
			runtime.ReadMemStats(&after)
			if a.status/100 != 4 {
				t.Fatalf("status %d, want 4xx: %.300s", a.status, a.body)
			}
			if msg := a.errBody(t).Message; !strings.Contains(msg, tc.mention) {
				t.Errorf("message %q does not name %q", msg, tc.mention)
			}
			const bound = 16 << 20
			if got := after.TotalAlloc - before.TotalAlloc; got > bound {
				t.Errorf("a %d-byte request allocated %d MiB before it was refused (%d), want at most %d MiB: it was decoded before its values were counted",
					len(tc.body), got>>20, a.status, bound>>20)
			}
		})
	}
	t.Run("attributes at their bound are served", func(t *testing.T) {
		// 64 KiB of one-character values: the most values a request within
		// its fields' bounds holds.
		attrs := `{"a":[` + list("0", 32_700) + `]}`
		wantStatus(t, b.do("PUT", "/v1/subscribers/dense", `{"attributes":`+attrs+`}`), 200)
	})
}

// A request refused before its body is read (no token, a wrong one, an
// unknown route) still held its connection busy for the read timeout
// (60 s): net/http reads the rest of the body before it answers, and this
// one never comes. A dashboard login trickling its form did the same. A
// busy connection is never closed to admit another, so two addresses doing
// this with 4 connections each (four with 64 each at the defaults) shut
// every other client out, /healthz included: 503 after 2 s, for as long
// as they kept it up, without a credential. A connection counts as serving
// only once its request has shown one (or is for an open route); until
// then it is closed to admit another, as an idle one is.
func TestServer_UnauthenticatedRequestsCannotHoldConnections(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	cfg := *b.cfg
	cfg.HTTP.Listen, cfg.HTTP.MaxConnections, cfg.HTTP.MaxConnectionsPerClient = "127.0.0.1:0", 8, 4
	cfg.HTTP.ReadyWithStoppedChannels = true
	srv := newServer(t, serverOptions{Config: &cfg, Store: b.store, Engine: b.engine, Redis: b.rds.Client, Dashboard: true})
	must(t, srv.Start(context.Background()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	addr := srv.Addr().String()

	// Two addresses, 4 connections each, every one a request whose body
	// never comes: without a token, with a wrong one, to no route, and a
	// dashboard login. Each follows a /healthz on its connection, whose
	// answer says the server is reading the next request.
	heads := []string{
		"POST /v1/notifications HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
		"POST /v1/dlq/purge HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong-0123456789\r\nContent-Length: 100\r\n\r\n",
		"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
		"POST /ui/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ntoken=",
	}
	for _, ip := range []byte{2, 3} {
		for _, head := range heads {
			c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}}).Dial("tcp", addr)
			must(t, err)
			t.Cleanup(func() { c.Close() })
			_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"+head)
			must(t, err)
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			must(t, err)
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	other := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 4)}}).DialContext,
	}}
	for _, path := range []string{"/healthz", "/readyz", "/v1/channels"} {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+tokenA)
		res, err := other.Do(req)
		if err != nil {
			t.Fatalf("GET %s while refused requests wait for their bodies: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s while refused requests wait for their bodies: %d, want 200", path, res.StatusCode)
		}
	}
}

// A route open to everyone (/healthz, /readyz) reads no body, so a request
// to it that declares one serves no one: its answer is written only after
// net/http has waited for that body, for the read timeout. Two addresses,
// 4 connections each (http.max_connections 8, …_per_client 4), each a
// /healthz or /readyz declaring 100 bytes that never come, counted as
// serving a request, so they held every connection for 60 s and everyone
// else got 503 after 2 s. Such a connection is closed to admit another now.
func TestServer_OpenRouteBodiesCannotHoldConnections(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	cfg := *b.cfg
	cfg.HTTP.Listen, cfg.HTTP.MaxConnections, cfg.HTTP.MaxConnectionsPerClient = "127.0.0.1:0", 8, 4
	cfg.HTTP.ReadyWithStoppedChannels = true
	srv := newServer(t, serverOptions{Config: &cfg, Store: b.store, Engine: b.engine, Redis: b.rds.Client})
	must(t, srv.Start(context.Background()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	addr := srv.Addr().String()
	for _, ip := range []byte{2, 3} {
		for _, path := range []string{"/healthz", "/readyz", "/healthz", "/readyz"} {
			c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}}).Dial("tcp", addr)
			must(t, err)
			t.Cleanup(func() { c.Close() })
			_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
			must(t, err)
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			must(t, err)
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	other := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 4)}}).DialContext,
	}}
	for _, path := range []string{"/healthz", "/v1/channels"} {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+tokenA)
		res, err := other.Do(req)
		if err != nil {
			t.Fatalf("GET %s while open routes wait for bodies: %v", path, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s while 2 addresses' /healthz and /readyz wait for bodies: %d %s, want 200", path, res.StatusCode, body)
		}
	}
}
