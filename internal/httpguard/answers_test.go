package httpguard_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/httpguard"
)

// serveHolding runs one request of client through a's handler, which holds
// n bytes, says its answer was encoded into encoded bytes (unless < 0), and
// then waits for hold to close before it answers. It returns once the hold
// is taken or refused, with the error.
func serveHolding(a *httpguard.Answers, client string, n, encoded int64, hold <-chan struct{}) (errc chan error) {
	errc = make(chan error, 1)
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := httpguard.HoldAnswer(r.Context(), n)
		if err == nil && encoded >= 0 {
			httpguard.Encoded(r.Context(), encoded)
		}
		errc <- err
		if err != nil {
			return
		}
		defer release()
		<-hold
	}))
	go func() {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Client", client)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	return errc
}

func byHeader(r *http.Request) string { return r.Header.Get("X-Client") }

// One client holds at most its share of the bound (at least the largest
// answer): past it, its requests wait and are refused as Busy while every
// other client's are served. A request's read bound is given back down to
// its encoded answer's size (Encoded), and taken again when the answer is
// larger; everything is given back when the request ends.
func TestAnswers_PerClientAndEncoded(t *testing.T) {
	t.Parallel()
	const total = 64 << 20
	share := httpguard.AnswerShare(total, 64, 256)
	if share != httpguard.MaxCharge {
		t.Fatalf("AnswerShare(64 MiB, 64, 256) = %d, want the largest answer %d", share, httpguard.MaxCharge)
	}
	a := httpguard.NewAnswers(total, 200*time.Millisecond).PerClient(share, byHeader)
	hold := make(chan struct{})
	defer close(hold)

	if err := <-serveHolding(a, "slow", share, -1, hold); err != nil {
		t.Fatalf("the slow client's first answer: %v", err)
	}
	var busy *httpguard.Busy
	if err := <-serveHolding(a, "slow", 1<<20, -1, hold); !errors.As(err, &busy) {
		t.Fatalf("the slow client's answer past its share: %v, want Busy", err)
	}
	if err := <-serveHolding(a, "other", share, -1, hold); err != nil {
		t.Fatalf("another client's answer while the slow one holds its share: %v", err)
	}
	b := httpguard.NewAnswers(total, 200*time.Millisecond).PerClient(share, byHeader)
	hold2 := make(chan struct{})
	defer close(hold2)
	for i := range 20 { // without Encoded, two would hold the share
		if err := <-serveHolding(b, "slow", share/2, 1<<10, hold2); err != nil {
			t.Fatalf("answer %d of 1 KiB encoded: %v; want each to hold its encoded size only", i, err)
		}
	}
	// An answer that encodes past its read bound takes the rest when it is
	// free; when it is not, it is written all the same, holding what it
	// held (it exists: waiting would only hold others up). Taken or not,
	// all is given back when the requests end.
	c := httpguard.NewAnswers(8<<20, 200*time.Millisecond)
	hold3 := make(chan struct{})
	if err := <-serveHolding(c, "", 1<<20, 4<<20, hold3); err != nil {
		t.Fatalf("grow to 4 MiB: %v", err)
	}
	if err := <-serveHolding(c, "", 1<<20, 5<<20, hold3); err != nil {
		t.Fatalf("grow to 5 MiB past the 4 MiB left: %v, want it written with what it holds", err)
	}
	if _, err := c.Hold(context.Background(), 4<<20); !errors.As(err, &busy) {
		t.Fatalf("4 MiB more while the two answers hold 4 and 1 MiB of 8: %v, want Busy", err)
	}
	close(hold3)
	time.Sleep(50 * time.Millisecond) // the held requests end, giving all back
	release, err := c.Hold(context.Background(), 8<<20)
	if err != nil {
		t.Fatalf("the whole bound once every request ended: %v", err)
	}
	release()
}

// TestAnswers_GrowthNeverWaits: two requests of one client each hold half
// its share, then each encodes an answer a little larger than its read
// bound. Each waited for the other's half before it could grow, and both
// were refused Busy after the bound's wait (rehearsal 54: 24 GETs of one
// notification under load, none served). Growth while holding is taken if
// free and never waited for: both answer at once. The bound's wait is an
// hour here, so growth that waited would hold the test past its guard.
func TestAnswers_GrowthNeverWaits(t *testing.T) {
	t.Parallel()
	share := int64(httpguard.MaxCharge)
	a := httpguard.NewAnswers(4*share, time.Hour).PerClient(share, byHeader)
	var both sync.WaitGroup
	both.Add(2)
	errs := make(chan error, 2)
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := httpguard.HoldAnswer(r.Context(), share/2)
		if err != nil {
			both.Done()
			errs <- err
			return
		}
		defer release()
		both.Done()
		both.Wait() // both hold their read bound before either encodes
		httpguard.Encoded(r.Context(), share/2+1<<20)
		errs <- nil
	}))
	for range 2 {
		go func() {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("X-Client", "one")
			h.ServeHTTP(httptest.NewRecorder(), r)
		}()
	}
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("holding half the share: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("an answer growing past its read bound while the other holds the rest of the share waited for it (a minute, of the bound's hour); want it written at once")
		}
	}
}
