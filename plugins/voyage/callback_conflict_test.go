package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// TestSender_Send_callback409InProgressIsTransient: the callback carries an
// Idempotency-Key, and a callback receiver that honours it (the IETF draft
// draft-ietf-httpapi-idempotency-key-header §2.7, Stripe) answers 409
// Conflict to a request whose key is still being processed. An earlier
// attempt, cut off by callback_timeout, may yet store the embeddings: the
// 409 is no final word. Judged PERMANENT, the notification was dead-lettered
// although its callback was delivered; TRANSIENT, the next retry gets the
// stored 2xx.
func TestSender_Send_callback409InProgressIsTransient(t *testing.T) {
	t.Parallel()
	f := newFakeVoyage(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	var processed atomic.Int64
	var mu sync.Mutex
	state := map[string]int{} // 1: in progress, 2: done
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key := req.Header.Get("Idempotency-Key")
		mu.Lock()
		st := state[key]
		if st == 0 {
			state[key] = 1
		}
		mu.Unlock()
		switch st {
		case 1:
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusConflict)
			return
		case 2:
			w.WriteHeader(http.StatusOK)
			return
		}
		<-release // slower than callback_timeout
		processed.Add(1)
		mu.Lock()
		state[key] = 2
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(cb.Close)

	cfg := func(timeout string) map[string]any {
		return map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5", "callback_url": cb.URL, "callback_timeout": timeout}
	}
	short, s := configure(t, cfg("200ms")), configure(t, cfg("30s"))
	m := message(`{"input":"a"}`)
	if v := short.Send(context.Background(), m); v.Outcome != sdk.OutcomeTransient {
		t.Fatalf("attempt 1 = %v (%s); want TRANSIENT (callback timeout)", v.Outcome, v.Detail)
	}
	m.Attempt = 2
	v := s.Send(context.Background(), m)
	if v.Outcome != sdk.OutcomeTransient || v.ProviderStatus != http.StatusConflict || v.RetryAfter != 2*time.Second {
		t.Errorf("attempt 2, callback answered 409 (in progress) = %v %d retry after %v (%s); want TRANSIENT 409 after 2s: the first attempt may still deliver it",
			v.Outcome, v.ProviderStatus, v.RetryAfter, v.Detail)
	}
	releaseOnce.Do(func() { close(release) })
	for deadline := time.Now().Add(10 * time.Second); processed.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if processed.Load() != 1 {
		t.Fatalf("the callback receiver processed %d requests; want 1", processed.Load())
	}
	m.Attempt = 3
	if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("attempt 3 = %v (%s); want SUCCESS (the stored answer)", v.Outcome, v.Detail)
	}
}
