package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// conformance is the sdktest suite against a receiver that records every
// webhook-id it sees, then checks each message reported sent arrived signed.
func conformance(t *testing.T, run func(*testing.T, sdktest.Features) *sdktest.Report) {
	t.Helper()
	var (
		mu  sync.Mutex
		ids = map[string]int{}
		bad []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ids[r.Header.Get("webhook-id")]++ // msg_<notification id>
		if err := verifySignature(testSecret, r.Header, body); err != nil {
			bad = append(bad, err.Error())
		}
		if r.URL.Path == "/gone" {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)

	cfg, _ := json.Marshal(map[string]any{"url": srv.URL + "/hook", "secret": testSecret, "allow_recipient_url": true})
	rep := run(t, sdktest.Features{
		Config: cfg,
		Invalid: map[string]json.RawMessage{
			"missing url":     json.RawMessage(`{}`),
			"bad secret":      json.RawMessage(`{"url":"http://127.0.0.1/","secret":"not-whsec"}`),
			"bad timeout":     json.RawMessage(`{"url":"http://127.0.0.1/","timeout":"fast"}`),
			"reserved header": json.RawMessage(`{"url":"http://127.0.0.1/","headers":{"Idempotency-Key":"x"}}`),
		},
		Succeed: sdk.Message{Recipient: "user-1", Payload: json.RawMessage(`{"text":"hi"}`)},
		// The receiver answers 410 Gone on /gone: permanent.
		Permanent: &sdk.Message{Recipient: srv.URL + "/gone", Payload: json.RawMessage(`{"text":"hi"}`)},
	})
	mu.Lock()
	defer mu.Unlock()
	for _, m := range rep.Sent {
		if id := fmt.Sprintf("msg_%d", m.ID); ids[id] == 0 {
			t.Errorf("message %d reported sent, but the receiver never got webhook-id %q", m.ID, id)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d requests failed signature verification, e.g. %s", len(bad), bad[0])
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("in-process", func(t *testing.T) {
		t.Parallel()
		conformance(t, func(t *testing.T, f sdktest.Features) *sdktest.Report { return sdktest.Run(t, &provider{}, f) })
	})
	t.Run("binary", func(t *testing.T) {
		t.Parallel()
		bin := testenv.BuildPlugin(t, ".")
		conformance(t, func(t *testing.T, f sdktest.Features) *sdktest.Report { return sdktest.RunBinary(t, bin, f) })
	})
}
