package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
)

// TestSender_Send_untrustedTLS: an api_url or auth_url whose certificate the
// plugin does not trust fails the message at once (PERMANENT, saying why)
// instead of retrying it until its attempts run out.
func TestSender_Send_untrustedTLS(t *testing.T) {
	t.Parallel()
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(untrusted.Close)

	t.Run("api_url", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]any{"api_url": untrusted.URL})
		v := b.send(b.sender, "", textPayload)
		if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, "final: the receiver's TLS certificate") {
			t.Errorf("verdict = %v %q; want PERMANENT naming the certificate", v.Outcome, v.Detail)
		}
	})

	t.Run("auth_url, when refreshing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]any{"auth_url": untrusted.URL})
		b.fake.expireAccess(testAccess)
		v := b.send(b.sender, "", textPayload)
		if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, "final: the receiver's TLS certificate") {
			t.Errorf("verdict = %v %q; want PERMANENT naming the certificate", v.Outcome, v.Detail)
		}
	})
}
