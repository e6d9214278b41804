package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

const token = "test-token-0123456789"

// fakeAPI is the provider's API as the plugin sees it: it wants the bearer
// token, refuses recipient "unknown" (400), is down for "flaky" (503),
// throttles "busy" (429, Retry-After: 30) and accepts anyone else.
type fakeAPI struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[int64]int // message id → times received
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{seen: map[int64]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID        int64           `json:"id"`
			Recipient string          `json:"recipient"`
			Payload   json.RawMessage `json:"payload"`
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		switch {
		case r.Header.Get("Authorization") != "Bearer "+token:
			http.Error(w, `{"error":"bad token"}`, http.StatusUnauthorized)
		case json.Unmarshal(body, &m) != nil || !json.Valid(m.Payload):
			http.Error(w, `{"error":"not a message"}`, http.StatusBadRequest)
		case m.Recipient == "unknown":
			http.Error(w, `{"error":"unknown recipient"}`, http.StatusBadRequest)
		case m.Recipient == "flaky":
			http.Error(w, `{"error":"try again"}`, http.StatusServiceUnavailable)
		case m.Recipient == "busy":
			w.Header().Set("Retry-After", "30")
			http.Error(w, `{"error":"slow down"}`, http.StatusTooManyRequests)
		default:
			f.mu.Lock()
			f.seen[m.ID]++
			f.mu.Unlock()
			fmt.Fprintf(w, `{"message_id":"hello-%d"}`, m.ID)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func features(api *fakeAPI) sdktest.Features {
	cfg, _ := json.Marshal(map[string]string{"url": api.URL, "token": token})
	return sdktest.Features{
		Config: cfg,
		Invalid: map[string]json.RawMessage{
			"missing url":          json.RawMessage(`{}`),
			"not an http url":      json.RawMessage(`{"url":"ftp://127.0.0.1/"}`),
			"a newline in a token": json.RawMessage(`{"url":"http://127.0.0.1:1/","token":"a\nb"}`),
		},
		Succeed:       sdk.Message{Recipient: "alice", Payload: json.RawMessage(`{"text":"hello"}`)},
		Permanent:     &sdk.Message{Recipient: "unknown", Payload: json.RawMessage(`{"text":"to nobody"}`)},
		Transient:     &sdk.Message{Recipient: "flaky", Payload: json.RawMessage(`{"text":"later"}`)},
		RetryAfter:    &sdk.Message{Recipient: "busy", Payload: json.RawMessage(`{"text":"slowly"}`)},
		RetryAfterMin: 30 * time.Second,
	}
}

// received checks that every message the suite saw delivered reached the
// API once.
func (f *fakeAPI) received(t *testing.T, rep *sdktest.Report) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range rep.Sent {
		if f.seen[m.ID] != 1 {
			t.Errorf("message %d: the API received it %d times, want once", m.ID, f.seen[m.ID])
		}
	}
}

// TestConformance runs the provider in-process.
func TestConformance(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t)
	api.received(t, sdktest.Run(t, provider{}, features(api)))
}

// TestConformance_Binary runs the same suite against the built plugin, as
// notifyd would launch it.
func TestConformance_Binary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "notifyd-plugin-hello")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	api := newFakeAPI(t)
	api.received(t, sdktest.RunBinary(t, bin, features(api)))
}
