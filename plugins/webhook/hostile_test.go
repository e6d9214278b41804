package main

// Tests of receivers that answer in ways no retry can fix or that try to
// get a credential into notifyd's status: TLS that cannot be trusted, plain
// HTTP on an https:// URL, credentials echoed back in an error page.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/sdk"
)

// connectProxy is an HTTP proxy on loopback that only tunnels (CONNECT), as
// an https target behind HTTPS_PROXY is reached.
func connectProxy(t *testing.T) *url.URL {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		upstream, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			upstream.Close()
			return
		}
		go func() { io.Copy(upstream, buf); upstream.Close() }()
		io.Copy(conn, upstream)
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

// expiredCert is a self-signed certificate for 127.0.0.1 that expired
// yesterday, and a pool that trusts it.
func expiredCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "expired"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// TestSender_Send_finalTLS: a receiver whose TLS cannot be trusted, that
// speaks plain HTTP on an https:// URL, or only TLS versions this host
// refuses (1.0, 1.1: TRANSIENT on every attempt until stop 44), gets a
// PERMANENT verdict saying so,
// whether fasthttp reaches it directly or net/http through a proxy.
func TestSender_Send_finalTLS(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	tlsSrv := httptest.NewTLSServer(ok)
	t.Cleanup(tlsSrv.Close)
	plainSrv := httptest.NewServer(ok)
	t.Cleanup(plainSrv.Close)
	cert, expiredPool := expiredCert(t)
	expiredSrv := httptest.NewUnstartedServer(ok)
	expiredSrv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	expiredSrv.StartTLS()
	t.Cleanup(expiredSrv.Close)

	oldTLS := httptest.NewUnstartedServer(ok) // TLS 1.0 and 1.1 only, which Go refuses
	oldTLS.TLS = &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	oldTLS.StartTLS()
	t.Cleanup(oldTLS.Close)

	trustTest := x509.NewCertPool()
	trustTest.AddCert(tlsSrv.Certificate())
	trustTest.AddCert(oldTLS.Certificate())
	_, tlsPort, _ := net.SplitHostPort(tlsSrv.Listener.Addr().String())
	proxyURL := connectProxy(t)

	tests := []struct {
		name  string
		roots *x509.CertPool
		url   string
		why   string
	}{
		{"untrusted certificate", nil, tlsSrv.URL + "/hook", "authority this host does not trust"},
		// The test certificate names 127.0.0.1 and example.com, not localhost.
		{"certificate for another host", trustTest, "https://localhost:" + tlsPort + "/hook", "not valid for this host name"},
		{"expired certificate", expiredPool, expiredSrv.URL + "/hook", "expired"},
		{"plain HTTP on an https URL", nil, strings.Replace(plainSrv.URL, "http://", "https://", 1) + "/hook", "does not speak TLS"},
		{"only TLS 1.0 and 1.1", trustTest, oldTLS.URL + "/hook", "no TLS version"},
	}
	for _, tt := range tests {
		for _, proxied := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/proxied=%v", tt.name, proxied), func(t *testing.T) {
				t.Parallel()
				p := &provider{tlsConfig: &tls.Config{RootCAs: tt.roots}}
				if proxied {
					p.proxy = func(*url.URL) (*url.URL, error) { return proxyURL, nil }
				}
				s := configure(t, p, map[string]any{"url": tt.url, "timeout": "5s"})
				v := s.Send(context.Background(), testMessage())
				if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, tt.why) {
					t.Errorf("verdict = %v %q; want PERMANENT saying %q", v.Outcome, v.Detail, tt.why)
				}
			})
		}
	}

	t.Run("a trusted certificate still delivers", func(t *testing.T) {
		t.Parallel()
		s := configure(t, &provider{tlsConfig: &tls.Config{RootCAs: trustTest}}, map[string]any{"url": tlsSrv.URL + "/hook"})
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
			t.Errorf("verdict = %v %q; want SUCCESS", v.Outcome, v.Detail)
		}
	})
}

// echoReceiver answers every request with the status its path names
// (/400, /500) and a body quoting the whole request: request line, every
// header, body — as a careless error page does. The query's pad puts that
// many bytes before it, to move the echo across the quoted prefix's end.
func echoReceiver(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		pad, _ := strconv.Atoi(r.URL.Query().Get("pad"))
		b.WriteString(strings.Repeat(".", pad))
		fmt.Fprintf(&b, "%s %s\n", r.Method, r.RequestURI)
		r.Header.Write(&b)
		body, _ := io.ReadAll(r.Body)
		b.Write(body)
		code, err := strconv.Atoi(strings.Trim(r.URL.Path, "/"))
		if err != nil {
			code = http.StatusBadRequest
		}
		w.WriteHeader(code)
		io.WriteString(w, b.String())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSender_Send_echoedSecrets: credentials a receiver echoes back in its
// error body never reach the verdict's detail (and so last_error).
func TestSender_Send_echoedSecrets(t *testing.T) {
	t.Parallel()
	srv := echoReceiver(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	const (
		user     = "hook-user-7"
		password = "hook-pass-s3cret"
		token    = "query-token-abc123"
		apiKey   = "api-key-0987654321"
		bearer   = "bearer-cred-zyxwvu"
	)
	secrets := []string{
		user, password, token, apiKey, bearer,
		base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
		testSecret, strings.TrimPrefix(testSecret, "whsec_"),
	}
	for _, code := range []int{400, 500} {
		for _, pad := range []int{0, sdk.ClassifyBodyPrefix - 40, sdk.ClassifyBodyPrefix - 120} {
			t.Run(fmt.Sprintf("HTTP %d pad %d", code, pad), func(t *testing.T) {
				t.Parallel()
				hook := fmt.Sprintf("http://%s:%s@%s/%d?token=%s&pad=%d", user, password, host, code, token, pad)
				s := configure(t, &provider{}, map[string]any{
					"url":     hook,
					"secret":  testSecret,
					"headers": map[string]string{"Authorization": "Bearer " + bearer, "X-Api-Key": apiKey},
				})
				v := s.Send(context.Background(), testMessage())
				if v.Outcome == sdk.OutcomeSuccess || v.ProviderStatus != code {
					t.Fatalf("verdict = %v %d; want the receiver's %d", v.Outcome, v.ProviderStatus, code)
				}
				for _, secret := range secrets {
					if leak := longestLeak(v.Detail, secret); leak != "" {
						t.Errorf("detail holds %q of a secret: %q", leak, v.Detail)
					}
				}
				if pad == 0 && !strings.Contains(v.Detail, "Idempotency-Key: order-42-shipped") {
					t.Errorf("detail = %q; want the rest of the echo kept", v.Detail)
				}
			})
		}
	}

	t.Run("a recipient URL's credentials", func(t *testing.T) {
		t.Parallel()
		s := configure(t, &provider{}, map[string]any{"allow_recipient_url": true})
		m := testMessage()
		m.Recipient = fmt.Sprintf("http://%s:%s@%s/400?token=%s", user, password, host, token)
		v := s.Send(context.Background(), m)
		for _, secret := range secrets[:3] {
			if strings.Contains(v.Detail, secret) {
				t.Errorf("detail holds %q: %q", secret, v.Detail)
			}
		}
	})
}

// TestSender_Send_echoedSecretsEscaped: a PHP receiver's error body
// echoing the request's headers through json_encode writes every "/" as
// "\/": a Basic credential or an API key with a "/" (base64 has one in 64
// characters) reached the detail whole but for a backslash, since only the
// secret's own form and Go's JSON form were redacted.
func TestSender_Send_echoedSecretsEscaped(t *testing.T) {
	t.Parallel()
	const (
		basic  = "aG9vazpwYXNzPz4/" // base64 of "hook:pass?>?"
		apiKey = "key/with/slash-0987654321"
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo, _ := json.Marshal(map[string]any{"error": "unauthorized", "headers": r.Header})
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(bytes.ReplaceAll(echo, []byte("/"), []byte(`\/`))) // as PHP's json_encode
	}))
	t.Cleanup(srv.Close)
	s := configure(t, &provider{}, map[string]any{
		"url":     srv.URL + "/hook",
		"headers": map[string]string{"Authorization": "Basic " + basic, "X-Api-Key": apiKey},
	})
	v := s.Send(context.Background(), testMessage())
	if v.Outcome != sdk.OutcomePermanent || v.ProviderStatus != http.StatusUnauthorized {
		t.Fatalf("verdict = %v %d (%s); want PERMANENT 401", v.Outcome, v.ProviderStatus, v.Detail)
	}
	for _, secret := range []string{basic, apiKey, "hook:pass"} {
		if leak := longestLeak(strings.ReplaceAll(v.Detail, `\/`, "/"), secret); leak != "" {
			t.Errorf("detail holds %q of a secret: %q", leak, v.Detail)
		}
	}
	if !strings.Contains(v.Detail, "unauthorized") {
		t.Errorf("detail = %q; want the rest of the answer kept", v.Detail)
	}
}

// TestSender_Send_unusableRecipientURL: a recipient URL no request can be
// sent to as written is PERMANENT at once, naming what is wrong, and nothing
// is sent. A port past 65535 was TRANSIENT on every attempt ("invalid
// port"); an empty port went to port 0 directly (refused, TRANSIENT) and to
// port 80 behind a proxy; a space in the query split the request line, and
// the receiver's 400 said nothing of why; no host name before the port
// ("http://:8080/") went to this machine's port.
func TestSender_Send_unusableRecipientURL(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, nil)
	host := strings.TrimPrefix(r.URL, "http://")
	s := configure(t, &provider{}, map[string]any{"allow_recipient_url": true})
	for recipient, why := range map[string]string{
		"http://127.0.0.1:99999/in":    "port",
		"http://127.0.0.1:0/in":        "port",
		"http://127.0.0.1:/in":         "port",
		"http://" + host + "/in?a=b c": "space",
		// No host name before the port: this machine's port, the receiver.
		"http://" + host[strings.LastIndexByte(host, ':'):] + "/in": "no host",
	} {
		m := testMessage()
		m.Recipient = recipient
		v := s.Send(context.Background(), m)
		if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, why) {
			t.Errorf("recipient %q: %v %d (%s); want PERMANENT naming the %s", recipient, v.Outcome, v.ProviderStatus, v.Detail, why)
		}
	}
	r.none(t)
}

// longestLeak is the longest start of secret (at least 8 bytes) that text
// holds, or "".
func longestLeak(text, secret string) string {
	for n := len(secret); n >= 8; n-- {
		if strings.Contains(text, secret[:n]) {
			return secret[:n]
		}
	}
	return ""
}

// TestProvider_Configure_urlCredentials: a config error, and the log line of
// a configured channel, never print the url's credentials.
func TestProvider_Configure_urlCredentials(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"ftp://cfg-user:cfg-pass-123@127.0.0.1/x?token=cfg-token-456",
		"http://cfg-user:cfg-pass-123@/x?token=cfg-token-456",
		"http://cfg-user:cfg-pass-123@127.0.0.1:99999999/x?token=cfg-token-456%zz",
		"http://cfg-user:cfg-pass-123@127.0.0.1/%zz?token=cfg-token-456",
	} {
		cfg, _ := json.Marshal(map[string]any{"url": raw, "timeout": "soon"})
		_, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "c", Config: cfg})
		if err == nil {
			t.Errorf("Configure(url %s, timeout soon) = nil error", raw)
			continue
		}
		for _, secret := range []string{"cfg-pass-123", "cfg-token-456"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Configure error %q shows %q", err, secret)
			}
		}
	}

	var logs strings.Builder
	cfg, _ := json.Marshal(map[string]any{"url": "http://cfg-user:cfg-pass-123@127.0.0.1/x?token=cfg-token-456"})
	if _, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "c", Config: cfg, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})}); err != nil {
		t.Fatal(err)
	}
	scanner := bufio.NewScanner(strings.NewReader(logs.String()))
	for scanner.Scan() {
		if line := scanner.Text(); strings.Contains(line, "cfg-pass-123") || strings.Contains(line, "cfg-token-456") {
			t.Errorf("log line shows a credential: %s", line)
		}
	}
	if !strings.Contains(logs.String(), "webhook channel configured") {
		t.Errorf("logs = %q; want the configured line", logs.String())
	}
}

// TestSender_Send_recipientURLCredentials: with allow_recipient_url, a URL
// the API caller picks gets the body and the signature, never the channel's
// static headers nor the user info or query values of its url; the channel's
// url still gets them, and so does a recipient URL naming the channel's own
// endpoint (same scheme, host, port and path). Through a proxy (net/http's
// client) as directly (fasthttp's).
func TestSender_Send_recipientURLCredentials(t *testing.T) {
	t.Parallel()
	const (
		user     = "hook-user-7"
		password = "hook-pass-s3cret"
		token    = "query-token-abc123"
		apiKey   = "api-key-0987654321"
		bearer   = "Bearer bearer-cred-zyxwvu"
	)
	channel := newReceiver(t, nil)
	stranger := newReceiver(t, nil) // a second server: the caller's URL
	chURL, _ := url.Parse(channel.URL)
	configured := fmt.Sprintf("http://%s:%s@%s/in?token=%s", user, password, chURL.Host, token)
	credentials := func(t *testing.T, got received) []string {
		var held []string
		for name, values := range got.header {
			for _, v := range values {
				for _, c := range []string{user, password, token, apiKey, bearer, base64.StdEncoding.EncodeToString([]byte(user + ":" + password))} {
					if strings.Contains(v, c) {
						held = append(held, name+": "+v)
					}
				}
			}
		}
		if strings.Contains(got.requestURI, token) {
			held = append(held, "request target "+got.requestURI)
		}
		return held
	}

	for _, via := range []string{"direct", "proxy"} {
		t.Run(via, func(t *testing.T) {
			p := &provider{}
			if via == "proxy" {
				// A proxy that is no proxy: net/http's client sends every
				// target through the test's own forwarding handler below.
				fwd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					out, _ := http.NewRequest(r.Method, r.RequestURI, r.Body)
					out.Header = r.Header.Clone()
					resp, err := http.DefaultTransport.RoundTrip(out)
					if err != nil {
						w.WriteHeader(http.StatusBadGateway)
						return
					}
					resp.Body.Close()
					w.WriteHeader(resp.StatusCode)
				}))
				t.Cleanup(fwd.Close)
				fu, _ := url.Parse(fwd.URL)
				p.proxy = func(*url.URL) (*url.URL, error) { return fu, nil }
			}
			s := configure(t, p, map[string]any{
				"url": configured, "secret": testSecret, "allow_recipient_url": true,
				"headers": map[string]string{"Authorization": bearer, "X-Api-Key": apiKey},
			})

			m := testMessage()
			m.Recipient = stranger.URL + "/theirs?x=1"
			if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
				t.Fatalf("recipient URL: %v (%s)", v.Outcome, v.Detail)
			}
			got := stranger.next(t)
			if err := verifySignature(testSecret, got.header, got.body); err != nil {
				t.Errorf("recipient URL: %v; want the body signed", err)
			}
			if !strings.Contains(string(got.body), `"id":42`) {
				t.Errorf("recipient URL body = %.200s; want the envelope", got.body)
			}
			if held := credentials(t, got); len(held) > 0 || got.header.Get("Authorization") != "" || got.header.Get("X-Api-Key") != "" {
				t.Errorf("recipient URL got the channel's credentials: %q (Authorization %q, X-Api-Key %q)",
					held, got.header.Get("Authorization"), got.header.Get("X-Api-Key"))
			}
			channel.none(t)

			// The channel's url: the headers go (Authorization set wins
			// over the user info's basic auth), and the query as configured.
			if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
				t.Fatalf("channel url: %v (%s)", v.Outcome, v.Detail)
			}
			got = channel.next(t)
			if got.header.Get("Authorization") != bearer || got.header.Get("X-Api-Key") != apiKey || got.query != "token="+token {
				t.Errorf("channel url got Authorization %q, X-Api-Key %q, query %q; want the configured ones",
					got.header.Get("Authorization"), got.header.Get("X-Api-Key"), got.query)
			}

			// A recipient URL with the channel url's scheme, host, port and
			// path is the channel's endpoint: the headers go; the request is
			// the recipient's URL as written (its own query).
			m.Recipient = "http://" + chURL.Host + "/in?tenant=b"
			if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
				t.Fatalf("same endpoint: %v (%s)", v.Outcome, v.Detail)
			}
			got = channel.next(t)
			if got.header.Get("Authorization") != bearer || got.header.Get("X-Api-Key") != apiKey || got.query != "tenant=b" {
				t.Errorf("same endpoint got Authorization %q, X-Api-Key %q, query %q; want the headers and the recipient's query",
					got.header.Get("Authorization"), got.header.Get("X-Api-Key"), got.query)
			}

			// Another path on the channel's host is not its endpoint.
			m.Recipient = "http://" + chURL.Host + "/other"
			if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
				t.Fatalf("other path: %v (%s)", v.Outcome, v.Detail)
			}
			got = channel.next(t)
			if held := credentials(t, got); got.path != "/other" || len(held) > 0 {
				t.Errorf("other path %q got the channel's credentials: %q", got.path, held)
			}
		})
	}

	t.Run("user info alone", func(t *testing.T) {
		s := configure(t, &provider{}, map[string]any{"url": configured, "allow_recipient_url": true})
		m := testMessage()
		m.Recipient = stranger.URL + "/theirs"
		if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("recipient URL: %v (%s)", v.Outcome, v.Detail)
		}
		if got := stranger.next(t); got.header.Get("Authorization") != "" {
			t.Errorf("recipient URL got Authorization %q; want no basic auth", got.header.Get("Authorization"))
		}
		s.Send(context.Background(), testMessage())
		wantBasic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
		if got := channel.next(t); got.header.Get("Authorization") != wantBasic {
			t.Errorf("channel url got Authorization %q; want the user info's basic auth", got.header.Get("Authorization"))
		}
	})
}

func TestSameEndpoint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"https://h.example/in", "https://h.example/in", true},
		{"https://H.example:443/in?x=1", "https://u:p@h.example/in?token=t", true},
		{"http://h.example", "http://h.example:80/", true},
		{"http://h.example/in", "https://h.example/in", false},
		{"https://h.example:8443/in", "https://h.example/in", false},
		{"https://h.example/in/", "https://h.example/in", false},
		{"https://h.example/In", "https://h.example/in", false},
		{"https://h.example.evil/in", "https://h.example/in", false},
	} {
		a, _ := url.Parse(c.a)
		b, _ := url.Parse(c.b)
		if got := sameEndpoint(a, b); got != c.want {
			t.Errorf("sameEndpoint(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
