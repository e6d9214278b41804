package hostile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// door: the HTTP door under hostile clients (issue 26, items 4, 5, 9, 10).
func door(t *testing.T, d *daemon) {
	t.Run("300 idle keep-alive connections", func(t *testing.T) { idleHog(t, d) })
	t.Run("wrong tokens from the same address", func(t *testing.T) { sharedAddressGuessing(t, d) })
	t.Run("a repeated JSON key", func(t *testing.T) { repeatedKeys(t, d) })
	t.Run("Postgres and Redis unreachable", outage)
}

// get answers one request on a connection of its own, with the token.
func get(t *testing.T, method, u, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	return res.StatusCode, res.Header, string(b)
}

// idleHog: one client holds more idle keep-alive connections than
// http.max_connections (256); /healthz, /readyz and an authorised enqueue
// still answer.
func idleHog(t *testing.T, d *daemon) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for i := range 300 {
		c, err := net.DialTimeout("tcp", d.addr, 30*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		held = append(held, c)
		// One request each, then the connection stays open for the next.
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", d.addr); err != nil {
			continue // closed already, to admit a newer one
		}
		if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	base := "http://" + d.addr
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _, body := get(t, "GET", base+path, ""); code != 200 {
			t.Errorf("GET %s with 300 idle connections held: %d %.200s, want 200", path, code, body)
		}
	}
	code, _, body := get(t, "POST", base+"/v1/notifications", `{"channel":"hooks","recipient":"door","payload":{"text":"hi"}}`)
	if code/100 != 2 {
		t.Errorf("enqueue with 300 idle connections held: %d %.200s, want 2xx", code, body)
	}
	d.alive(t)
}

// sharedAddressGuessing: wrong tokens from 127.0.0.1 are throttled, the
// right one from the same address is served at once.
func sharedAddressGuessing(t *testing.T, d *daemon) {
	u := "http://" + d.addr + "/v1/channels"
	guess := func() int {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer wrong-token-0123456789abcdef")
		res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("a wrong token: %v", err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for range 10 {
		guess()
	}
	if code := guess(); code != 429 {
		t.Errorf("the 11th wrong token in a minute: %d, want 429", code)
	}
	if code, _, body := get(t, "GET", u, ""); code != 200 {
		t.Errorf("the right token from the same address after 11 wrong ones: %d %.200s, want 200", code, body)
	}
	if code := guess(); code != 429 {
		t.Errorf("a wrong token after the right one: %d, want 429 still", code)
	}
}

// repeatedKeys: the body went to kakao; here it is refused.
func repeatedKeys(t *testing.T, d *daemon) {
	for _, body := range []string{
		`{"channel":"hooks","channel":"refused","recipient":"r","payload":{}}`,
		`{"notifications":[{"channel":"hooks","recipient":"a","payload":{"text":"a","text":"b"}}]}`,
	} {
		code, answer := d.raw(t, "POST", "/v1/notifications", []byte(body))
		if code != 400 || !strings.Contains(answer, "is given twice") {
			t.Errorf("%s: %d %.200s, want 400 naming the repeated key", body, code, answer)
		}
	}
}

// outage runs a daemon of its own whose Postgres and Redis are reached
// through proxies the test cuts: while one is down every route that needs it
// answers 503 with Retry-After (never 500), and all answer again once it is
// back.
func outage(t *testing.T) {
	pg, rds := newCutProxy(t), newCutProxy(t)
	d := start(t, via(pg.via, rds.via))
	base := "http://" + d.addr
	id := enqueueOK(t, d, "hooks", 1)[0]
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/notifications", `{"channel":"hooks","recipient":"outage","payload":{"text":"hi"}}`},
		{"GET", fmt.Sprintf("/v1/notifications/%d", id), ""},
		{"GET", "/v1/channels", ""},
		{"GET", "/v1/dlq", ""},
	}
	// down cuts p and waits for each route in paths to answer 503 with
	// Retry-After; any 500 fails the test.
	down := func(what string, p *cutProxy, paths ...string) {
		t.Helper()
		p.cut()
		for _, rt := range routes {
			if !slices.Contains(paths, rt.path) {
				continue
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				code, h, body := get(t, rt.method, base+rt.path, rt.body)
				if code == 503 && h.Get("Retry-After") != "" && strings.Contains(body, `"unavailable"`) {
					break
				}
				if code >= 500 && code != 503 || code == 503 && h.Get("Retry-After") == "" {
					t.Fatalf("%s down: %s %s answered %d (Retry-After %q) %.200s, want 503 with Retry-After", what, rt.method, rt.path, code, h.Get("Retry-After"), body)
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s down for 60 s: %s %s still answers %d %.200s, want 503", what, rt.method, rt.path, code, body)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	up := func(what string, p *cutProxy) {
		t.Helper()
		p.restore()
		for _, rt := range routes {
			deadline := time.Now().Add(60 * time.Second)
			for {
				code, _, body := get(t, rt.method, base+rt.path, rt.body)
				if code/100 == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s back for 60 s: %s %s answers %d %.200s, want success", what, rt.method, rt.path, code, body)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	down("Postgres", pg, "/v1/notifications", fmt.Sprintf("/v1/notifications/%d", id), "/v1/channels", "/v1/dlq")
	// The dashboard too: an "unavailable, retry" page, 503.
	page := dashboardPage(t, d, "/ui/dead")
	if page.code != 503 || page.retryAfter == "" || !strings.Contains(page.body, "Unavailable") {
		t.Errorf("dashboard /ui/dead with Postgres down: %d (Retry-After %q) %.200s, want the 503 unavailable page", page.code, page.retryAfter, page.body)
	}
	up("Postgres", pg)
	// /v1/channels reads the queues in Redis.
	down("Redis", rds, "/v1/channels")
	up("Redis", rds)
	d.alive(t)
}

type pageAnswer struct {
	code       int
	retryAfter string
	body       string
}

// dashboardPage logs in to the dashboard with the token and gets path.
func dashboardPage(t *testing.T, d *daemon, path string) pageAnswer {
	t.Helper()
	base := "http://" + d.addr
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.PostForm(base+"/ui/login", url.Values{"token": {token}, "next": {"/ui/"}})
	if err != nil {
		t.Fatalf("dashboard login: %v", err)
	}
	res.Body.Close()
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == "notifyd_ui_session" {
			cookie = ck
		}
	}
	if cookie == nil {
		t.Fatalf("dashboard login answered %d without a session cookie", res.StatusCode)
	}
	req, _ := http.NewRequest("GET", base+path, nil)
	req.AddCookie(cookie)
	res, err = c.Do(req)
	if err != nil {
		t.Fatalf("dashboard %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return pageAnswer{res.StatusCode, res.Header.Get("Retry-After"), string(b)}
}

// cutProxy forwards 127.0.0.1:port to a service's address until cut: then
// it closes every connection and stops listening (a new connection is
// refused, as with a stopped server) until restore listens on the same port.
type cutProxy struct {
	t    *testing.T
	addr string // its own, fixed once chosen

	mu     sync.Mutex
	target string // host:port of the service
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newCutProxy(t *testing.T) *cutProxy {
	p := &cutProxy{t: t, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

// via points a service URL at the proxy and the proxy at the URL's host.
func (p *cutProxy) via(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		p.t.Fatalf("service URL: %v", err)
	}
	p.mu.Lock()
	p.target = u.Host
	p.mu.Unlock()
	u.Host = p.addr
	return u.String()
}

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *cutProxy) forward(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	s, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut meanwhile
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(s, c)
	go pipe(c, s)
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *cutProxy) restore() {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return
		}
		if time.Now().After(deadline) || !errors.Is(err, syscall.EADDRINUSE) {
			p.t.Fatalf("listen again on %s: %v", p.addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
