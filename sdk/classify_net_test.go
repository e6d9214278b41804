package sdk_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// expiredTLSServer is an https server on loopback whose certificate, valid
// for 127.0.0.1, expired yesterday; the returned pool trusts it.
func expiredTLSServer(t *testing.T) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "expired test"},
		NotBefore:             time.Now().Add(-48 * time.Hour),
		NotAfter:              time.Now().Add(-24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return srv, pool
}

// TestClassifyHTTP_transportErrors sends to real loopback servers whose
// failures no retry can fix (PERMANENT, saying why) and to ones where a
// retry may help (TRANSIENT).
func TestClassifyHTTP_transportErrors(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	tlsSrv := httptest.NewTLSServer(ok)
	t.Cleanup(tlsSrv.Close)
	plainSrv := httptest.NewServer(ok)
	t.Cleanup(plainSrv.Close)
	expiredSrv, expiredPool := expiredTLSServer(t)

	// A TCP server that answers with something that is neither TLS nor HTTP.
	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { garbage.Close() })
	go func() {
		for {
			c, err := garbage.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
			c.Close()
		}
	}()

	// A receiver speaking only TLS 1.0 and 1.1, which Go refuses.
	oldTLS := httptest.NewUnstartedServer(ok)
	oldTLS.TLS = &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	oldTLS.StartTLS()
	t.Cleanup(oldTLS.Close)
	oldPool := x509.NewCertPool()
	oldPool.AddCert(oldTLS.Certificate())

	// Receivers that require a client certificate this host does not
	// have: TLS 1.2 refuses the handshake (handshake_failure), TLS 1.3 the
	// first read after it (certificate_required).
	certRequired := func(version uint16) *httptest.Server {
		srv := httptest.NewUnstartedServer(ok)
		srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: version, MaxVersion: version}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	cert12, cert13 := certRequired(tls.VersionTLS12), certRequired(tls.VersionTLS13)
	poolOf := func(srv *httptest.Server) *x509.CertPool {
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		return pool
	}

	trusting := func(pool *x509.CertPool) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	}
	tlsPool := x509.NewCertPool()
	tlsPool.AddCert(tlsSrv.Certificate())
	_, tlsPort, _ := net.SplitHostPort(tlsSrv.Listener.Addr().String())

	tests := []struct {
		name   string
		client *http.Client
		url    string
		want   sdk.Outcome
		why    string
	}{
		{"untrusted certificate", &http.Client{Timeout: 5 * time.Second}, tlsSrv.URL, sdk.OutcomePermanent, "authority this host does not trust"},
		// The test certificate names 127.0.0.1, ::1 and example.com, not localhost.
		{"certificate for another host", trusting(tlsPool), "https://localhost:" + tlsPort, sdk.OutcomePermanent, "not valid for this host name"},
		{"expired certificate", trusting(expiredPool), expiredSrv.URL, sdk.OutcomePermanent, "expired"},
		{"plain HTTP server on an https URL", &http.Client{Timeout: 5 * time.Second}, strings.Replace(plainSrv.URL, "http://", "https://", 1), sdk.OutcomePermanent, "does not speak TLS"},
		{"not TLS at all", &http.Client{Timeout: 5 * time.Second}, "https://" + garbage.Addr().String(), sdk.OutcomePermanent, "does not speak TLS"},
		{"only TLS 1.0 and 1.1", trusting(oldPool), oldTLS.URL, sdk.OutcomePermanent, "no TLS version"},
		{"client certificate required, TLS 1.2", trusting(poolOf(cert12)), cert12.URL, sdk.OutcomePermanent, "alert: handshake failure"},
		{"client certificate required, TLS 1.3", trusting(poolOf(cert13)), cert13.URL, sdk.OutcomePermanent, "alert: certificate required"},
		{"trusted certificate", trusting(tlsPool), tlsSrv.URL, sdk.OutcomeSuccess, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := tt.client.Get(tt.url)
			if err == nil {
				defer resp.Body.Close()
			}
			v := sdk.ClassifyHTTP(resp, err)
			if v.Outcome != tt.want || !strings.Contains(v.Detail, tt.why) {
				t.Errorf("got %v %q; want %v with a detail saying %q", v.Outcome, v.Detail, tt.want, tt.why)
			}
			if tt.want == sdk.OutcomePermanent && !strings.Contains(v.Detail, "final") {
				t.Errorf("detail %q does not say the failure is final", v.Detail)
			}
		})
	}
}

// TestClassifyStatus_final checks that 501 and 505 are final while the other
// 5xx (and 423, 499, and a number that is no status at all) stay worth
// retrying, with any Retry-After capped.
func TestClassifyStatus_final(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]sdk.Outcome{
		500: sdk.OutcomeTransient, 501: sdk.OutcomePermanent, 502: sdk.OutcomeTransient,
		503: sdk.OutcomeTransient, 504: sdk.OutcomeTransient, 505: sdk.OutcomePermanent,
		507: sdk.OutcomeTransient, 599: sdk.OutcomeTransient,
		423: sdk.OutcomeTransient, 499: sdk.OutcomeTransient, 409: sdk.OutcomePermanent,
		// not status codes (a garbled status line): the message is not at fault
		0: sdk.OutcomeTransient, 42: sdk.OutcomeTransient, 600: sdk.OutcomeTransient, 999: sdk.OutcomeTransient,
	} {
		v := sdk.ClassifyStatus(code, "99999999", nil)
		if v.Outcome != want || v.ProviderStatus != code {
			t.Errorf("HTTP %d: got %v status %d, want %v", code, v.Outcome, v.ProviderStatus, want)
		}
		if want == sdk.OutcomeTransient && v.RetryAfter != sdk.MaxRetryAfter {
			t.Errorf("HTTP %d Retry-After 99999999: hint %v, want the cap %v", code, v.RetryAfter, sdk.MaxRetryAfter)
		}
	}
}

// ClassifyKeyedStatus is ClassifyStatus for a request that carried an
// Idempotency-Key: only a 409 differs, retried with its Retry-After.
func TestClassifyKeyedStatus(t *testing.T) {
	t.Parallel()
	for _, code := range []int{200, 400, 404, 409, 422, 429, 500, 501} {
		plain, keyed := sdk.ClassifyStatus(code, "7", nil), sdk.ClassifyKeyedStatus(code, "7", nil)
		want := plain.Outcome
		if code == 409 {
			want = sdk.OutcomeTransient
			if plain.Outcome != sdk.OutcomePermanent || keyed.RetryAfter != 7*time.Second {
				t.Errorf("409: plain %v, keyed retry after %v; want PERMANENT without a key, 7s with one", plain.Outcome, keyed.RetryAfter)
			}
		}
		if keyed.Outcome != want || keyed.ProviderStatus != code {
			t.Errorf("HTTP %d with a key: %v status %d, want %v", code, keyed.Outcome, keyed.ProviderStatus, want)
		}
	}
}
