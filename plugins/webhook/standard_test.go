package main

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// TestStandardWebhooks: what the Standard Webhooks spec asks of a sender.
func TestStandardWebhooks(t *testing.T) {
	t.Parallel()
	second := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a-second-secret-of-32-bytes-long"))

	t.Run("webhook-id is notifyd's, whatever the idempotency key holds", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL, "secret": testSecret})
		m := testMessage()
		m.IdempotencyKey = "order.42.shipped" // dots: the signed content's separator
		if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("outcome = %v (%s)", v.Outcome, v.Detail)
		}
		got := r.next(t)
		if id, key := got.header.Get("webhook-id"), got.header.Get("Idempotency-Key"); id != "msg_42" || key != "order.42.shipped" {
			t.Errorf("webhook-id %q, Idempotency-Key %q; want msg_42 and the client's key", id, key)
		}
		if err := verifySignature(testSecret, got.header, got.body); err != nil {
			t.Error(err)
		}
	})
	t.Run("two secrets during a rotation: two signatures, each verifiable", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL, "secret": testSecret + " " + second})
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("outcome = %v (%s)", v.Outcome, v.Detail)
		}
		got := r.next(t)
		sigs := strings.Fields(got.header.Get("webhook-signature"))
		if len(sigs) != 2 {
			t.Fatalf("webhook-signature %q, want two space-separated signatures", got.header.Get("webhook-signature"))
		}
		for _, secret := range []string{testSecret, second} {
			if err := verifySignature(secret, got.header, got.body); err != nil {
				t.Errorf("secret %s…: %v", secret[:10], err)
			}
		}
	})
	t.Run("secrets are whsec_ and 24 to 64 bytes", func(t *testing.T) {
		t.Parallel()
		for _, bad := range []string{
			"whsec_" + base64.StdEncoding.EncodeToString([]byte("short-16-bytes!!")),
			"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65)),
			"not-whsec",
			testSecret + " not-whsec",
		} {
			_, err := (&provider{}).newSender(config{URL: "http://127.0.0.1:1/", Secret: bad})
			if err == nil || !strings.Contains(err.Error(), "secret") {
				t.Errorf("secret %q…: %v, want it refused naming secret", bad[:min(len(bad), 12)], err)
			}
			if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(bad, "whsec_")) {
				t.Errorf("the error echoes the secret: %v", err)
			}
		}
	})
	t.Run("410 Gone is final and says to disable the endpoint", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
		s := configure(t, &provider{}, map[string]any{"url": r.URL, "retry_all_non_2xx": true})
		v := s.Send(context.Background(), testMessage())
		if v.Outcome != sdk.OutcomePermanent || !strings.Contains(v.Detail, "endpoint gone (410): disable this endpoint") {
			t.Errorf("verdict %v %q, want PERMANENT saying the endpoint is gone", v.Outcome, v.Detail)
		}
	})
	t.Run("the default timeout follows the spec's 15–30 s", func(t *testing.T) {
		t.Parallel()
		s, err := (&provider{}).newSender(config{URL: "http://127.0.0.1:1/"})
		if err != nil {
			t.Fatal(err)
		}
		if s.timeout < 15*time.Second || s.timeout > 30*time.Second {
			t.Errorf("default timeout %s, want 15–30 s", s.timeout)
		}
	})
}

// TestSender_Send_goneEndpointsBounded: the plugin remembers the endpoints
// that answered 410, to warn once each. With allow_recipient_url the API's
// callers name the endpoints: every distinct URL answering 410 (a query
// token each, or one per deleted customer endpoint) stayed in memory for
// the life of the process. At most maxGoneRemembered are kept.
func TestSender_Send_goneEndpointsBounded(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	go func() { // the receiver's record of requests is not needed here
		for range r.got {
		}
	}()
	s := configure(t, &provider{}, map[string]any{"allow_recipient_url": true}).(*sender)
	for i := range maxGoneRemembered + 100 {
		m := testMessage()
		m.Recipient = r.URL + "/hook?endpoint=" + strconv.Itoa(i)
		if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomePermanent {
			t.Fatalf("send %d: %v (%s); want PERMANENT 410", i, v.Outcome, v.Detail)
		}
	}
	if n := s.gone.len(); n > maxGoneRemembered {
		t.Errorf("%d endpoints remembered; want at most %d", n, maxGoneRemembered)
	}
}
