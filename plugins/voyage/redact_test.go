package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/sdk"
)

// TestSender_Send_callbackEchoesSecrets: a callback receiver whose error page
// quotes the request (URL, headers) gets none of the callback's credentials
// into the verdict's detail.
func TestSender_Send_callbackEchoesSecrets(t *testing.T) {
	t.Parallel()
	f := newFakeVoyage(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%s %s\n", r.Method, r.RequestURI)
		r.Header.Write(w)
	}))
	t.Cleanup(echo.Close)
	const (
		user, pass, sig = "cb-user-1", "cb-pass-123", "cb-sig-789"
		bearer, key     = "cb-bearer-abc", "cb-key-0987"
	)
	s := configure(t, map[string]any{
		"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5",
		"callback_url":     fmt.Sprintf("http://%s:%s@%s/cb?sig=%s", user, pass, strings.TrimPrefix(echo.URL, "http://"), sig),
		"callback_headers": map[string]string{"Authorization": "Bearer " + bearer, "X-Cb-Key": key},
	})
	v := s.Send(context.Background(), message(`{"input":"a"}`))
	if v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "X-Cb-Key") {
		t.Fatalf("verdict = %v %q; want the callback's TRANSIENT 500 quoting its echo", v.Outcome, v.Detail)
	}
	for _, secret := range []string{user, pass, sig, bearer, key, testKey} {
		if strings.Contains(v.Detail, secret) {
			t.Errorf("detail holds %q: %q", secret, v.Detail)
		}
	}
}

// TestProvider_Configure_baseURLCredentials: base_url's credentials are
// neither logged nor reported when Voyage cannot be reached.
func TestProvider_Configure_baseURLCredentials(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})
	raw, _ := json.Marshal(map[string]any{
		"api_key": testKey, "model": "voyage-3.5",
		"base_url": "http://vu-user-0:vu-pass-123@" + closed + "/",
	})
	s, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "embed", Config: raw, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	v := s.Send(context.Background(), message(`{"input":"a"}`))
	if v.Outcome != sdk.OutcomeTransient {
		t.Errorf("verdict = %v %q; want TRANSIENT (connection refused)", v.Outcome, v.Detail)
	}
	for what, text := range map[string]string{"detail": v.Detail, "logs": logs.String()} {
		for _, secret := range []string{"vu-pass-123", testKey} { // a user name is no secret: RedactURL keeps it, as url.URL.Redacted does
			if strings.Contains(text, secret) {
				t.Errorf("%s hold %q: %q", what, secret, text)
			}
		}
	}

	// Config errors name the key, never the URL.
	for _, bad := range []string{
		"ftp://vu-user:vu-pass-123@h/?token=vu-token-456",
		"http://vu-user:vu-pass-123@/x?token=vu-token-456",
		"http://vu-user:vu-pass-123@h/?token=vu-token-456",
	} {
		for _, k := range []string{"base_url", "callback_url"} {
			if k == "callback_url" && strings.HasPrefix(bad, "http://vu-user:vu-pass-123@h/") {
				continue // a valid callback URL
			}
			raw, _ := json.Marshal(map[string]any{"api_key": testKey, "model": "voyage-3.5", k: bad})
			_, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "embed", Config: raw})
			if err == nil || !strings.Contains(err.Error(), k) || strings.Contains(err.Error(), "vu-pass-123") || strings.Contains(err.Error(), "vu-token-456") {
				t.Errorf("Configure(%s %s) error = %v; want one naming %s without credentials", k, bad, err, k)
			}
		}
	}
}
