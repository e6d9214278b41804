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

// idempotentReceiver is a receiver that honours the Idempotency-Key header as
// the IETF draft (draft-ietf-httpapi-idempotency-key-header §2.7) and Stripe
// do: a request whose key is still being processed is answered 409 Conflict;
// one whose key has finished gets the stored answer again. The first request
// is held until release is closed.
type idempotentReceiver struct {
	*httptest.Server
	release   chan struct{}
	processed atomic.Int64 // requests whose work was done (deliveries)
	arrived   chan struct{}

	mu    sync.Mutex
	state map[string]int // 0: unknown, 1: in progress, 2: done
}

func newIdempotentReceiver(t *testing.T, conflict func(http.ResponseWriter)) *idempotentReceiver {
	t.Helper()
	r := &idempotentReceiver{release: make(chan struct{}), arrived: make(chan struct{}, 16), state: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key := req.Header.Get("Idempotency-Key")
		r.mu.Lock()
		st := r.state[key]
		if st == 0 {
			r.state[key] = 1
		}
		r.mu.Unlock()
		r.arrived <- struct{}{}
		switch st {
		case 1:
			conflict(w)
			return
		case 2:
			w.WriteHeader(http.StatusOK) // the stored answer of the first request
			return
		}
		<-r.release // processing, slower than the sender's timeout
		r.processed.Add(1)
		r.mu.Lock()
		r.state[key] = 2
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	t.Cleanup(func() {
		select {
		case <-r.release:
		default:
			close(r.release)
		}
	})
	return r
}

// TestSender_Send_409InProgressIsTransient: a retry that meets the first
// attempt still in progress at the receiver (409 Conflict, the Idempotency-Key
// draft's and Stripe's answer) says nothing final about the message: the
// first attempt may yet deliver it (here it does). Judged PERMANENT, the
// message was dead-lettered although it was delivered; TRANSIENT, the next
// retry gets the stored 2xx.
func TestSender_Send_409InProgressIsTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		conflict   func(http.ResponseWriter)
		retryAfter time.Duration
	}{
		{"bare 409", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":"a request with this Idempotency-Key is being processed"}`))
		}, 0},
		{"409 with Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusConflict)
		}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newIdempotentReceiver(t, tc.conflict)
			// The first attempt's channel times out soon; the retries' waits
			// for their (prompt) answers are generous, for a busy machine.
			short := configure(t, &provider{}, map[string]any{"url": r.URL, "timeout": "200ms"})
			s := configure(t, &provider{}, map[string]any{"url": r.URL, "timeout": "30s"})

			// Attempt 1: the receiver takes it and is still working when the
			// sender's timeout ends it.
			m := testMessage()
			if v := short.Send(context.Background(), m); v.Outcome != sdk.OutcomeTransient {
				t.Fatalf("attempt 1 = %v (%s); want TRANSIENT (timeout)", v.Outcome, v.Detail)
			}
			<-r.arrived
			// Attempt 2: the first is still in progress.
			m.Attempt = 2
			v := s.Send(context.Background(), m)
			<-r.arrived
			if v.Outcome != sdk.OutcomeTransient {
				t.Errorf("attempt 2 answered 409 (in progress) = %v (%s); want TRANSIENT: the first attempt may still deliver it", v.Outcome, v.Detail)
			}
			if v.RetryAfter != tc.retryAfter {
				t.Errorf("attempt 2 retry after = %v; want %v", v.RetryAfter, tc.retryAfter)
			}
			if v.ProviderStatus != http.StatusConflict {
				t.Errorf("attempt 2 provider status = %d; want 409", v.ProviderStatus)
			}
			// The first attempt completes: the message was delivered.
			close(r.release)
			deadline := time.Now().Add(10 * time.Second)
			for r.processed.Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if r.processed.Load() != 1 {
				t.Fatalf("the receiver processed %d requests; want 1", r.processed.Load())
			}
			// Attempt 3 gets the stored answer.
			m.Attempt = 3
			if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
				t.Errorf("attempt 3 = %v (%s); want SUCCESS (the stored answer)", v.Outcome, v.Detail)
			}
			if n := r.processed.Load(); n != 1 {
				t.Errorf("delivered %d times; want 1", n)
			}
		})
	}
}
