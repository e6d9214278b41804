package main

// Tests of what the HTTP client does under Send: connection reuse, replay on
// a dead keep-alive connection, TLS, proxies, URL handling.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// countConns counts the TCP connections srv accepts.
func countConns(srv *httptest.Server) *atomic.Int64 {
	var n atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
	return &n
}

func TestSender_Send_reusesConnections(t *testing.T) {
	t.Parallel()
	// Answers of every shape leave the connection reusable: no body, a
	// short body, a chunked body, an error with a body.
	answers := []func(http.ResponseWriter){
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) },
		func(w http.ResponseWriter) { io.WriteString(w, `{"ok":true}`) },
		func(w http.ResponseWriter) {
			io.WriteString(w, "part one,")
			w.(http.Flusher).Flush() // chunked
			io.WriteString(w, "part two")
		},
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest); io.WriteString(w, "bad") },
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) },
	}
	var i atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		answers[int(i.Add(1)-1)%len(answers)](w)
	}))
	conns := countConns(srv)
	srv.Start()
	t.Cleanup(srv.Close)

	s := configure(t, &provider{}, map[string]any{"url": srv.URL, "secret": testSecret})
	for n := range 3 * len(answers) {
		v := s.Send(context.Background(), testMessage())
		if want := []int{204, 200, 200, 400, 503}[n%len(answers)]; v.ProviderStatus != want {
			t.Fatalf("send %d: status %d (%s); want %d", n, v.ProviderStatus, v.Detail, want)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("%d sends one after another opened %d connections; want 1, kept alive", 3*len(answers), got)
	}
}

func TestSender_Send_largeBodies(t *testing.T) {
	t.Parallel()

	t.Run("an error body is quoted from its start, and not read whole", func(t *testing.T) {
		t.Parallel()
		wrote := make(chan int64, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			chunk := []byte(strings.Repeat("e", 64<<10))
			var n int64
			for range 1600 { // 100 MB, far past what may be read
				k, err := w.Write(chunk)
				n += int64(k)
				if err != nil {
					break
				}
			}
			wrote <- n
		}))
		t.Cleanup(srv.Close)
		s := configure(t, &provider{}, map[string]any{"url": srv.URL})
		v := s.Send(context.Background(), testMessage())
		if v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "HTTP 500 Internal Server Error: eeee") ||
			!strings.HasSuffix(v.Detail, "…") || len(v.Detail) > 700 {
			t.Errorf("verdict = %v %.80q… (%d bytes); want TRANSIENT quoting the body's start", v.Outcome, v.Detail, len(v.Detail))
		}
		select {
		case n := <-wrote:
			if n >= 100<<20 {
				t.Errorf("the receiver could write all %d bytes: the body was read whole", n)
			}
		case <-time.After(10 * time.Second):
			t.Error("the receiver is still writing: the connection was not closed")
		}
	})

	t.Run("response headers up to 16 KB", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Big", strings.Repeat("h", 12<<10))
			w.WriteHeader(http.StatusAccepted)
		})
		s := configure(t, &provider{}, map[string]any{"url": r.URL})
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess || v.ProviderStatus != 202 {
			t.Errorf("verdict = %v %d (%s); want SUCCESS 202", v.Outcome, v.ProviderStatus, v.Detail)
		}
	})
}

// TestSender_Send_staleConnection: a receiver that closes a keep-alive
// connection between two sends (as any does after its idle timeout) costs no
// failed send: the second goes again on a new connection.
func TestSender_Send_staleConnection(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{}, 8)
	url, requests := rawReceiver(t, func(c net.Conn) bool {
		// Keep-alive as far as the client can tell; then gone.
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		c.Close()
		closed <- struct{}{}
		return false
	})
	s := configure(t, &provider{}, map[string]any{"url": url})
	for n := range 3 {
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("send %d: %v (%s); want SUCCESS on a fresh connection", n, v.Outcome, v.Detail)
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("the receiver did not close the connection")
		}
		time.Sleep(20 * time.Millisecond) // let the FIN arrive
	}
	if got := requests.Load(); got != 3 {
		t.Errorf("receiver answered %d requests; want 3", got)
	}
}

func TestSender_Send_canceled(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, nil)
	s := configure(t, &provider{}, map[string]any{"url": r.URL})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v := s.Send(ctx, testMessage()); v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "canceled") {
		t.Errorf("verdict = %v %q; want TRANSIENT, canceled", v.Outcome, v.Detail)
	}
	r.none(t)
}

func TestSender_Send_url(t *testing.T) {
	t.Parallel()

	t.Run("the request target is the URL's path and query as written, without fragment", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		raw := r.URL + "/a%2Fb/./c%20d/?x=1%202&y=%C3%A9&z#frag"
		s := configure(t, &provider{}, map[string]any{"url": raw})
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("%v (%s)", v.Outcome, v.Detail)
		}
		u, _ := url.Parse(raw)
		if got, want := r.next(t).requestURI, u.RequestURI(); got != want {
			t.Errorf("request target = %q; want %q (what net/http sends)", got, want)
		}
	})

	t.Run("user info becomes basic auth and is never echoed", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })
		s := configure(t, &provider{}, map[string]any{"url": strings.Replace(r.URL, "://", "://hook-user:hook%20pass@", 1) + "/h"})
		v := s.Send(context.Background(), testMessage())
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte("hook-user:hook pass"))
		if got := r.next(t).header.Get("Authorization"); got != want {
			t.Errorf("Authorization = %q; want %q", got, want)
		}
		if v.Outcome != sdk.OutcomePermanent || strings.Contains(v.Detail, "hook-user") || strings.Contains(v.Detail, "pass") {
			t.Errorf("verdict = %v %q; want PERMANENT without the user info", v.Outcome, v.Detail)
		}
	})

	t.Run("an explicit Authorization header wins over user info", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{
			"url":     strings.Replace(r.URL, "://", "://u:p@", 1),
			"headers": map[string]any{"Authorization": "Bearer t"},
		})
		s.Send(context.Background(), testMessage())
		if got := r.next(t).header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer t" {
			t.Errorf("Authorization = %q; want just the configured one", got)
		}
	})

	t.Run("IPv6 receiver", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Fatalf("listen on the IPv6 loopback [::1] (this machine has one; a receiver there must work): %v", err)
		}
		r := &receiver{got: make(chan received, 4)}
		r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			r.got <- received{method: req.Method, path: req.URL.Path, header: req.Header.Clone(), body: body}
			w.WriteHeader(http.StatusNoContent)
		}))
		r.Listener.Close()
		r.Listener = ln
		r.Start()
		t.Cleanup(r.Close)
		s := configure(t, &provider{}, map[string]any{"allow_recipient_url": true})
		m := testMessage()
		m.Recipient = r.URL + "/v6"
		if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("send to %s: %v (%s)", m.Recipient, v.Outcome, v.Detail)
		}
		if got := r.next(t); got.path != "/v6" {
			t.Errorf("path = %q; want /v6", got.path)
		}
	})
}

func TestSender_Send_tls(t *testing.T) {
	t.Parallel()
	var sawTLS atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.TLS != nil && r.Header.Get("Webhook-Id") != "" {
			sawTLS.Store(true)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)

	t.Run("a trusted certificate", func(t *testing.T) {
		t.Parallel()
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		p := &provider{tlsConfig: &tls.Config{RootCAs: roots}}
		s := configure(t, p, map[string]any{"url": srv.URL + "/hook", "secret": testSecret})
		// The certificate is for 127.0.0.1 and example.com: both the IP and
		// a name (the TLS server name comes from the URL) must verify.
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("%v (%s)", v.Outcome, v.Detail)
		}
		if !sawTLS.Load() {
			t.Error("the receiver saw no request over TLS")
		}
	})

	t.Run("an untrusted certificate is final and names the reason", func(t *testing.T) {
		t.Parallel()
		s := configure(t, &provider{}, map[string]any{"url": srv.URL + "/hook?token=s3cr3t"})
		v := s.Send(context.Background(), testMessage())
		if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, "certificate") || strings.Contains(v.Detail, "s3cr3t") {
			t.Errorf("verdict = %v %q; want PERMANENT naming the certificate, without the query", v.Outcome, v.Detail)
		}
	})

	t.Run("the handshake is bounded by the send's timeout", func(t *testing.T) {
		t.Parallel()
		// A listener that accepts and never speaks TLS.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
			}
		}()
		s := configure(t, &provider{}, map[string]any{"url": "https://" + ln.Addr().String() + "/", "timeout": "200ms"})
		start := time.Now()
		v := s.Send(context.Background(), testMessage())
		if took := time.Since(start); v.Outcome != sdk.OutcomeTransient || took > 10*time.Second { // unbounded would be the 1 m default or for ever
			t.Errorf("verdict = %v %q after %v; want TRANSIENT at about 200ms", v.Outcome, v.Detail, took)
		}
	})
}

// TestSender_Send_proxy: a target the proxy settings send through a proxy
// goes there the way net/http always sent it (absolute-form request to an
// http proxy), every header and the signature intact.
func TestSender_Send_proxy(t *testing.T) {
	t.Parallel()
	direct := newReceiver(t, nil)
	viaProxy := make(chan received, 4)
	proxySrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		viaProxy <- received{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, requestURI: r.RequestURI, header: r.Header.Clone(), body: body}
		w.Header().Set("Retry-After", "4")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(proxySrv.Close)
	proxyURL, _ := url.Parse(proxySrv.URL)

	p := &provider{proxy: func(u *url.URL) (*url.URL, error) {
		if u.Host == "hooks.example.com" { // as NO_PROXY would leave the rest alone
			return proxyURL, nil
		}
		return nil, nil
	}}
	s := configure(t, p, map[string]any{"url": "http://hooks.example.com/in?k=v", "secret": testSecret, "allow_recipient_url": true})

	v := s.Send(context.Background(), testMessage())
	if v.Outcome != sdk.OutcomeTransient || v.ProviderStatus != 503 || v.RetryAfter != 4*time.Second {
		t.Errorf("verdict = %v %d %v (%s); want TRANSIENT 503, retry after 4s", v.Outcome, v.ProviderStatus, v.RetryAfter, v.Detail)
	}
	var got received
	select {
	case got = <-viaProxy:
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy got no request")
	}
	if got.method != http.MethodPost || got.requestURI != "http://hooks.example.com/in?k=v" {
		t.Errorf("proxy got %s %s; want POST http://hooks.example.com/in?k=v", got.method, got.requestURI)
	}
	if err := verifySignature(testSecret, got.header, got.body); err != nil {
		t.Errorf("signature through the proxy: %v", err)
	}
	if got.header.Get("Idempotency-Key") != "order-42-shipped" || got.header.Get("User-Agent") != DefaultUserAgent {
		t.Errorf("headers through the proxy = %v", got.header)
	}

	// A recipient the proxy settings leave alone is reached directly.
	m := testMessage()
	m.Recipient = direct.URL + "/direct"
	if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("direct recipient: %v (%s)", v.Outcome, v.Detail)
	}
	if got := direct.next(t); got.path != "/direct" {
		t.Errorf("direct path = %q", got.path)
	}
	select {
	case got := <-viaProxy:
		t.Errorf("the proxy got %s %s; want the direct recipient reached directly", got.method, got.requestURI)
	default:
	}
}

func TestProxyConfigured(t *testing.T) {
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"} {
		t.Setenv(k, "")
	}
	if proxyConfigured() {
		t.Error("no proxy variable set: proxyConfigured() = true")
	}
	t.Setenv("NO_PROXY", "example.com")
	if proxyConfigured() {
		t.Error("only NO_PROXY set: proxyConfigured() = true")
	}
	t.Setenv("https_proxy", "http://proxy.internal:3128")
	if !proxyConfigured() {
		t.Error("https_proxy set: proxyConfigured() = false")
	}
}

// A receiver that sends its status and headers, then stalls in the middle
// of the body: the send still ends by its timeout (the body is streamed, and
// the connection's deadline bounds its reads too), with the answer it got.
func TestSender_Send_stalledBody(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			r := hangingReceiver(t, func(w http.ResponseWriter) {
				w.Header().Set("Content-Length", "100000")
				w.WriteHeader(code)
				_, _ = w.Write([]byte("partial"))
				w.(http.Flusher).Flush()
			})
			s := configure(t, &provider{}, map[string]any{"url": r.URL, "timeout": "300ms"})
			start := time.Now()
			v := s.Send(context.Background(), testMessage())
			if took := time.Since(start); took > 10*time.Second { // unbounded would be the 1 m default or for ever
				t.Errorf("send took %v; want it cut at the 300ms timeout", took)
			}
			want := sdk.OutcomeSuccess
			if code != http.StatusOK {
				want = sdk.OutcomeTransient
			}
			if v.Outcome != want {
				t.Errorf("outcome = %v (%s); want %v", v.Outcome, v.Detail, want)
			}
		})
	}
}

// rawReceiver is sdktest.RawReceiver at the path /hook: for each request it
// reads whole (counted in requests, before answer runs) it calls answer; the
// connection closes when answer returns false.
func rawReceiver(t *testing.T, answer func(c net.Conn) (keep bool)) (url string, requests *atomic.Int64) {
	t.Helper()
	return sdktest.RawReceiver(t, "/hook", answer)
}

// TestSender_Send_droppedAfterTheRequest: a receiver that takes the whole
// request and then drops the connection may have acted on it. Once it has
// begun to answer (halfway through a status line or the headers) the send is
// not replayed within the call: one request, TRANSIENT, and the retry is the
// engine's, later, under the same webhook-id. Dropped before the answer's
// first byte, it cannot be told from a stale keep-alive connection (which
// must be replayed: TestSender_Send_staleConnection), and goes at most
// twice. It once went five times (MaxIdemponentCallAttempts 5).
func TestSender_Send_droppedAfterTheRequest(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		answer string
		most   int64
	}{
		"closed unanswered":         {"", 2},
		"reset after an early hint": {"HTTP/1.1 103 Early Hints\r\n\r\n", 2},
		"reset mid status line":     {"HTTP/1.1 200 O", 1},
		"closed mid headers":        {"HTTP/1.1 200 OK\r\nContent-Le", 1},
	} {
		answer := c.answer
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url, requests := rawReceiver(t, func(c net.Conn) bool {
				io.WriteString(c, answer)
				if tc, ok := c.(*net.TCPConn); ok && answer != "" {
					tc.SetLinger(0) // a reset, not a FIN
				}
				return false
			})
			s := configure(t, &provider{}, map[string]any{"url": url})
			v := s.Send(context.Background(), testMessage())
			if v.Outcome != sdk.OutcomeTransient {
				t.Errorf("verdict %v (%s); want TRANSIENT", v.Outcome, v.Detail)
			}
			// Every request sent was counted before its connection closed,
			// which was before Send returned.
			if got := requests.Load(); got < 1 || got > c.most {
				t.Errorf("the receiver got %d requests for one send; want 1 to %d", got, c.most)
			}
		})
	}
}

// TestSender_Send_status000: fasthttp parses a status code of 000 as 0 and
// reports 0 as 200, so a receiver answering "HTTP/1.1 000" was a delivery.
// It is a garbled answer: TRANSIENT, sent once, the detail saying why —
// however fasthttp would read the line. The first check looked for " 000"
// at a fixed place, so two spaces before the code, an empty line before
// the status line, or a 100 or 103 before the answer made it a delivery
// again (stop 42).
func TestSender_Send_status000(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]string{
		"as written":                 "HTTP/1.1 000 Whatever\r\nContent-Length: 0\r\n\r\n",
		"two spaces before the code": "HTTP/1.1  000 Whatever\r\nContent-Length: 0\r\n\r\n",
		"an empty line first":        "\r\nHTTP/1.1 000 Whatever\r\nContent-Length: 0\r\n\r\n",
		"no reason phrase":           "HTTP/1.1 000\r\nContent-Length: 0\r\n\r\n",
		"after a 100 Continue":       "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 000 Whatever\r\nContent-Length: 0\r\n\r\n",
		"after a 103 Early Hints":    "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 000 Whatever\r\nContent-Length: 0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url, requests := rawReceiver(t, func(c net.Conn) bool {
				io.WriteString(c, answer)
				return true
			})
			s := configure(t, &provider{}, map[string]any{"url": url})
			v := s.Send(context.Background(), testMessage())
			if v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "000") {
				t.Errorf("verdict %v status %d (%s); want TRANSIENT naming the 000", v.Outcome, v.ProviderStatus, v.Detail)
			}
			if got := requests.Load(); got != 1 {
				t.Errorf("the receiver got %d requests; want 1", got)
			}
		})
	}
}

// statusScan finds a 000 wherever fasthttp would read the status code, and
// nowhere else, however the answer is split between reads (one byte a Read
// included).
func TestStatusScan(t *testing.T) {
	t.Parallel()
	for answer, want := range map[string]bool{
		"HTTP/1.1 000 x\r\n\r\n":                              true,
		"HTTP/1.1   000\r\n\r\n":                              true,
		"\n\r\n\r\nHTTP/1.0 000 x\n\n":                        true,
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 000 x\r\n\r\n": true,
		"HTTP/1.1 102\nA: b\n\nHTTP/1.1 000\n\n":              true,
		"HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 000 in the body":     false,
		"HTTP/1.1 200 000\r\n\r\n":                            false,
		"HTTP/1.1 0000 x\r\n\r\n":                             false, // not three bytes: fasthttp refuses it
		"HTTP/1.1 00 x\r\n\r\n":                               false,
		"HTTP/1.1 101 Switching\r\n\r\nHTTP/1.1 000\r\n":      false, // 101 is final to fasthttp
		"HTTP/1.1 404 Not Found\r\nX: 000\r\n\r\n":            false,
	} {
		for _, step := range []int{1, 2, 3, 7, len(answer)} {
			var s statusScan
			found := false
			for i := 0; i < len(answer) && !found; i += step {
				chunk := answer[i:min(i+step, len(answer))]
				if j := s.scan([]byte(chunk)); j >= 0 {
					found = true
					if c := chunk[j]; c != ' ' && c != '\r' && c != '\n' {
						t.Errorf("%q, %d a read: index %d is %q, want the byte after the code", answer, step, j, c)
					}
				}
			}
			if found != want {
				t.Errorf("%q, %d bytes a read: found = %v, want %v", answer, step, found, want)
			}
		}
	}
}

// A final 101 Switching Protocols to a request that asked for no upgrade
// (both clients hand it back as the answer) was PERMANENT: dead-lettered.
// Through a proxy (net/http) with Upgrade headers its body is the
// connection itself, which the request's deadline does not cover: the
// detail's read waited for the receiver to close.
func TestSender_Send_101(t *testing.T) {
	t.Parallel()
	u, _ := rawReceiver(t, func(c net.Conn) bool {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\n\r\n")
		return true
	})
	s := configure(t, &provider{}, map[string]any{"url": u})
	if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeTransient || v.ProviderStatus != 101 {
		t.Errorf("101 = %v %d (%s); want TRANSIENT, status 101", v.Outcome, v.ProviderStatus, v.Detail)
	}

	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	pu, _ := rawReceiver(t, func(c net.Conn) bool {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n")
		<-hold
		return false
	})
	proxyURL, _ := url.Parse(pu)
	proxyURL.Path = ""
	p := &provider{proxy: func(*url.URL) (*url.URL, error) { return proxyURL, nil }}
	s = configure(t, p, map[string]any{"url": "http://hooks.example.com/in", "timeout": "300ms"})
	got := make(chan sdk.Verdict, 1)
	go func() { got <- s.Send(context.Background(), testMessage()) }()
	select {
	case v := <-got:
		if v.Outcome != sdk.OutcomeTransient {
			t.Errorf("101 through a proxy = %v (%s); want TRANSIENT", v.Outcome, v.Detail)
		}
	case <-time.After(30 * time.Second): // uncut, it waits for the receiver
		t.Error("Send still running 30 s after its 300ms timeout: the 101's body is read without a deadline")
	}
}
