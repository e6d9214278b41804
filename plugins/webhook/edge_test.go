package main

// Answers at the providers' edge: a 303 to the POST, a TLS server that
// wants a client certificate, an IPv6 zone in the URL, and the hostile
// answers a receiver can write (1xx, 204, 3xx without Location, Retry-After
// in every form, cut and endless bodies, an answer after the timeout).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// TestSender_Send_303IsFinal: a 303 See Other to the POST may mean the
// receiver processed it (RFC 9110 §15.4.4, §9.3.3) or that it sends
// requests it will not take to a sign-in page: neither a delivery (that
// would lose every message to such a URL silently) nor a retry (a processed
// POST delivered twice). PERMANENT, saying so, sent once and never followed,
// on both clients and with retry_all_non_2xx (which made it TRANSIENT: sent
// again on every attempt).
func TestSender_Send_303IsFinal(t *testing.T) {
	t.Parallel()
	for _, proxied := range []bool{false, true} {
		for _, retryAll := range []bool{false, true} {
			t.Run(fmt.Sprintf("proxied=%v/retry_all_non_2xx=%v", proxied, retryAll), func(t *testing.T) {
				t.Parallel()
				r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Location", "/deliveries/42")
					w.WriteHeader(http.StatusSeeOther)
				})
				p := &provider{}
				u := r.URL + "/hook"
				if proxied { // the receiver is its own proxy: absolute-form requests
					pu, _ := url.Parse(r.URL)
					p.proxy = func(*url.URL) (*url.URL, error) { return pu, nil }
				}
				s := configure(t, p, map[string]any{"url": u, "retry_all_non_2xx": retryAll})
				v := s.Send(context.Background(), testMessage())
				if v.Outcome != sdk.OutcomePermanent || v.ProviderStatus != http.StatusSeeOther || !strings.Contains(v.Detail, "may have processed") {
					t.Errorf("303 = %v %d (%s); want PERMANENT, status 303, saying the POST may have been processed", v.Outcome, v.ProviderStatus, v.Detail)
				}
				if got := r.next(t); got.path != "/hook" {
					t.Errorf("request went to %s", got.path)
				}
				time.Sleep(50 * time.Millisecond)
				r.none(t) // not followed, not sent again
			})
		}
	}
	t.Run("other redirects stay final", func(t *testing.T) {
		t.Parallel()
		for _, code := range []int{300, 301, 302, 304, 305, 307, 308} {
			u, requests := rawReceiver(t, func(c net.Conn) bool {
				fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n", code) // no Location
				return true
			})
			s := configure(t, &provider{}, map[string]any{"url": u})
			if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomePermanent || v.ProviderStatus != code {
				t.Errorf("%d without Location = %v %d (%s); want PERMANENT", code, v.Outcome, v.ProviderStatus, v.Detail)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("%d: %d requests; want 1", code, n)
			}
		}
	})
}

// TestSender_Send_clientCertificateRequired: a receiver that requires a
// client certificate refuses every handshake of a plugin that has none,
// the same way each time: TLS 1.2 answers the alert handshake_failure
// during the handshake, TLS 1.3 certificate_required on the first read
// after it (which fasthttp reported as "the server closed connection
// before returning the first response byte", replayed it on a new
// connection and made TRANSIENT). Both were retried to max attempts. Now
// PERMANENT by the alert's kind, on both clients, and never a request the
// receiver processed.
func TestSender_Send_clientCertificateRequired(t *testing.T) {
	t.Parallel()
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		var served atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			served.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, MaxVersion: version}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		for _, proxied := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/proxied=%v", tls.VersionName(version), proxied), func(t *testing.T) {
				p := &provider{tlsConfig: &tls.Config{RootCAs: pool}}
				if proxied {
					pu := connectProxy(t)
					p.proxy = func(*url.URL) (*url.URL, error) { return pu, nil }
				}
				s := configure(t, p, map[string]any{"url": srv.URL + "/hook", "timeout": "5s"})
				for range 3 { // the first, and on a pool that saw it fail
					v := s.Send(context.Background(), testMessage())
					if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, "refused this host's TLS handshake") {
						t.Errorf("verdict = %v %q; want PERMANENT naming the refused handshake", v.Outcome, v.Detail)
					}
				}
				if n := served.Load(); n != 0 {
					t.Errorf("the receiver served %d requests", n)
				}
			})
		}
	}
}

// TestTLSAlertKind: only alerts that say the peer refuses this host's TLS
// configuration are final, found by type whatever wraps them; a handshake
// cut by the network, or an alert of a fault of the moment, is retried.
func TestTLSAlertKind(t *testing.T) {
	t.Parallel()
	remote := func(a tls.AlertError) error {
		// crypto/tls's own remote-alert error: a *net.OpError over its
		// unexported alert type, which only reflection reaches.
		return &net.OpError{Op: "remote error", Err: alertOf(t, uint8(a))}
	}
	for _, tt := range []struct {
		err   error
		final bool
	}{
		{remote(116), true}, // certificate_required
		{remote(40), true},  // handshake_failure
		{remote(42), true},  // bad_certificate
		{remote(48), true},  // unknown_ca
		{remote(112), true}, // unrecognized_name
		{fmt.Errorf("wrapped: %w", remote(45)), true},
		{tls.AlertError(116), true}, // QUIC's and a handshake's own
		{remote(80), false},         // internal_error: the receiver's fault of the moment
		{remote(20), false},         // bad_record_mac: a damaged record
		{remote(0), false},          // close_notify
		{io.EOF, false},
		{&net.OpError{Op: "read", Err: fmt.Errorf("connection reset by peer")}, false},
		{fmt.Errorf("remote error: tls: certificate required"), false}, // text alone is no kind
	} {
		if got := sdk.RefusedTLS(tt.err) != ""; got != tt.final {
			t.Errorf("sdk.RefusedTLS(%v) final = %v; want %v", tt.err, got, tt.final)
		}
	}
}

// alertOf makes crypto/tls's unexported alert value a remote alert carries,
// by reading one from a real handshake refused for want of a certificate.
func alertOf(t *testing.T, code uint8) error {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	c, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	var op *net.OpError
	if !errorsAs(err, &op) || op.Op != "remote error" {
		t.Fatalf("no remote alert from a refused handshake: %v", err)
	}
	return withAlertCode(op.Err, code)
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// withAlertCode is a value of alert's type (crypto/tls's unexported alert)
// holding code.
func withAlertCode(alert error, code uint8) error {
	v := reflect.New(reflect.TypeOf(alert)).Elem()
	v.SetUint(uint64(code))
	return v.Interface().(error)
}

// TestSender_Send_ipv6Zone: a URL naming a link-local receiver with its
// zone (http://[fe80::1%25eth0]:8080/) dials through that interface, and
// the zone, which means something only on this host, stays out of the Host
// header (RFC 6874 §4; RFC 9110 §7.2's uri-host has no zone): fasthttp sent
// "Host: [fe80::1%eth0]:8080", which a strict receiver refuses with a 400
// (PERMANENT). net/http (the proxied path) drops it too.
func TestSender_Send_ipv6Zone(t *testing.T) {
	t.Parallel()
	// The machine's IPv6 loopback and its interface are part of the test
	// environment (Redis listens on ::1 too): missing, that is a failure to
	// report, not a case to skip.
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatalf("listen on the IPv6 loopback [::1] (the test needs it): %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	var lo string
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatalf("list the network interfaces: %v", err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			lo = i.Name
			break
		}
	}
	if lo == "" {
		t.Fatalf("no loopback interface among %d (the test dials [::1] through it by name)", len(ifs))
	}
	hosts := make(chan string, 4)
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		if strings.Contains(r.Host, "%") { // as a strict server does
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	_, port := splitPort(ln.Addr().String())
	zoned := fmt.Sprintf("http://[::1%%25%s]:%s/hook", lo, port)

	s := configure(t, &provider{}, map[string]any{"url": zoned})
	if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("verdict = %v %d (%s); want SUCCESS", v.Outcome, v.ProviderStatus, v.Detail)
	}
	if h := <-hosts; h != "[::1]:"+port {
		t.Errorf("Host header = %q; want [::1]:%s, without the zone", h, port)
	}
	// A recipient URL with a zone, on a channel that allows them.
	s = configure(t, &provider{}, map[string]any{"allow_recipient_url": true})
	m := testMessage()
	m.Recipient = zoned
	if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("recipient URL: verdict = %v %d (%s); want SUCCESS", v.Outcome, v.ProviderStatus, v.Detail)
	}
	if h := <-hosts; h != "[::1]:"+port {
		t.Errorf("recipient URL: Host header = %q; want [::1]:%s", h, port)
	}
}

func splitPort(addr string) (string, string) {
	h, p, _ := net.SplitHostPort(addr)
	return h, p
}

// TestSender_Send_hostileAnswers: answers no well-behaved receiver writes,
// each ended by a verdict within the send's timeout, sent once unless
// dropped before the answer's first byte (TestSender_Send_droppedAfterTheRequest),
// a 2xx whatever follows it a delivery, a Retry-After in any form at most
// sdk.MaxRetryAfter, and the connection never read for the next request's
// answer when this one's was not read to its end.
func TestSender_Send_hostileAnswers(t *testing.T) {
	t.Parallel()
	endless := func(head string) func(c net.Conn) bool {
		return func(c net.Conn) bool {
			io.WriteString(c, head)
			chunk := "400\r\n" + strings.Repeat("x", 0x400) + "\r\n"
			for range 1 << 16 { // 64 MiB, unless the client closes first
				if _, err := io.WriteString(c, chunk); err != nil {
					break
				}
			}
			return false
		}
	}
	answer := func(s string) func(c net.Conn) bool {
		return func(c net.Conn) bool { io.WriteString(c, s); return true }
	}
	tests := []struct {
		name   string
		answer func(c net.Conn) bool
		want   sdk.Outcome
		status int
		ra     time.Duration
	}{
		{"100 then nothing", func(c net.Conn) bool {
			io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
			time.Sleep(time.Second)
			return false
		}, sdk.OutcomeTransient, 0, 0},
		{"102 then 200", answer("HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeSuccess, 200, 0},
		{"endless 1xx", func(c net.Conn) bool {
			for range 1 << 16 {
				if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
					break
				}
			}
			return false
		}, sdk.OutcomeTransient, 0, 0},
		{"204 with a body", answer("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello"), sdk.OutcomeSuccess, 204, 0},
		{"429 Retry-After past the cap", answer("HTTP/1.1 429 X\r\nRetry-After: 99999999999999999999999999\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeTransient, 429, sdk.MaxRetryAfter},
		{"429 Retry-After in year 9999", answer("HTTP/1.1 429 X\r\nRetry-After: Fri, 31 Dec 9999 23:59:59 GMT\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeTransient, 429, sdk.MaxRetryAfter},
		{"429 Retry-After an HTTP date past", answer("HTTP/1.1 429 X\r\nRetry-After: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeTransient, 429, 0},
		{"425 Retry-After negative", answer("HTTP/1.1 425 X\r\nRetry-After: -5\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeTransient, 425, 0},
		{"408 Retry-After 1.5", answer("HTTP/1.1 408 X\r\nRetry-After: 1.5\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeTransient, 408, 0},
		{"503 Retry-After of 15,000 digits", answer("HTTP/1.1 503 X\r\nRetry-After: " + strings.Repeat("9", 15000) + "\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeTransient, 503, sdk.MaxRetryAfter},
		{"200 cut mid body", func(c net.Conn) bool {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
			return false
		}, sdk.OutcomeSuccess, 200, 0},
		{"503 cut mid body", func(c net.Conn) bool {
			io.WriteString(c, "HTTP/1.1 503 X\r\nContent-Length: 100\r\n\r\nabc")
			return false
		}, sdk.OutcomeTransient, 503, 0},
		{"200 chunked, never ending", endless("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), sdk.OutcomeSuccess, 200, 0},
		{"503 chunked, never ending", endless("HTTP/1.1 503 X\r\nTransfer-Encoding: chunked\r\n\r\n"), sdk.OutcomeTransient, 503, 0},
		{"503 chunk size past int64", func(c net.Conn) bool {
			io.WriteString(c, "HTTP/1.1 503 X\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffffff\r\nabc")
			return false
		}, sdk.OutcomeTransient, 503, 0},
		{"Content-Length past int64", func(c net.Conn) bool {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n")
			return false
		}, sdk.OutcomeTransient, 0, 0},
		{"two Content-Lengths", answer("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde"), sdk.OutcomeTransient, 0, 0},
		{"status 2000", answer("HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeTransient, 0, 0},
		{"status 020", answer("HTTP/1.1 020 OK\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeTransient, 20, 0},
		{"bare CR line ends", func(c net.Conn) bool {
			io.WriteString(c, "HTTP/1.1 200 OK\rContent-Length: 0\r\r")
			time.Sleep(time.Second)
			return false
		}, sdk.OutcomeTransient, 0, 0},
		{"NUL in a header", answer("HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n"), sdk.OutcomeTransient, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, requests := rawReceiver(t, tt.answer)
			s := configure(t, &provider{}, map[string]any{"url": u, "timeout": "500ms"})
			start := time.Now()
			v := s.Send(context.Background(), testMessage())
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("send took %v; want it ended by the 500ms timeout", took)
			}
			if v.Outcome != tt.want || v.ProviderStatus != tt.status || v.RetryAfter != tt.ra {
				t.Errorf("verdict %v status %d retry after %v (%s); want %v %d %v", v.Outcome, v.ProviderStatus, v.RetryAfter, v.Detail, tt.want, tt.status, tt.ra)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("%d requests; want 1", n)
			}
		})
	}

	t.Run("an answer after the timeout is never the next request's", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int64
		u, _ := rawReceiver(t, func(c net.Conn) bool {
			if n.Add(1) == 1 {
				time.Sleep(700 * time.Millisecond)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				return true
			}
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
			return true
		})
		s := configure(t, &provider{}, map[string]any{"url": u, "timeout": "300ms"})
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeTransient {
			t.Errorf("first: %v (%s); want TRANSIENT (no answer by the timeout)", v.Outcome, v.Detail)
		}
		time.Sleep(600 * time.Millisecond) // the late 200 is written now
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomePermanent || v.ProviderStatus != 400 {
			t.Errorf("second: %v %d (%s); want its own answer, PERMANENT 400", v.Outcome, v.ProviderStatus, v.Detail)
		}
	})
}
