package main

// How often one Send may put a message on the wire when the receiver (or the
// proxy in front of it) drops the connection without an answer.

import (
	"context"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// TestSender_Send_droppedAfterTheRequestViaProxy: behind a proxy the
// webhook sends with net/http, which replays a request carrying an
// Idempotency-Key (every webhook request does) when a reused connection is
// lost before the answer's first byte — on every idle connection in turn,
// then on a new one. A receiver that took the request and dropped the
// connection got it once per idle connection plus one in a single Send (9
// with 8 idle; the pool keeps up to 1,024), where the direct fasthttp path
// sends it at most twice (TestSender_Send_droppedAfterTheRequest).
func TestSender_Send_droppedAfterTheRequestViaProxy(t *testing.T) {
	t.Parallel()
	const warm = 8
	var (
		drop, mu = atomic.Bool{}, sync.Mutex{}
		opened   int
		allIn    = make(chan struct{})
	)
	proxy, requests := rawReceiver(t, func(c net.Conn) bool {
		if drop.Load() {
			return false // unanswered
		}
		mu.Lock()
		if opened++; opened == warm {
			close(allIn)
		}
		mu.Unlock()
		select { // every warm-up request on a connection of its own
		case <-allIn:
		case <-time.After(10 * time.Second):
		}
		_, _ = c.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
		return true
	})
	proxyURL, _ := url.Parse(proxy)
	proxyURL.Path = ""
	p := &provider{proxy: func(*url.URL) (*url.URL, error) { return proxyURL, nil }}
	s := configure(t, p, map[string]any{"url": "http://hooks.example.com/in"})

	var wg sync.WaitGroup
	for range warm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
				t.Errorf("warm-up send: %v (%s)", v.Outcome, v.Detail)
			}
		}()
	}
	wg.Wait()
	drop.Store(true)
	before := requests.Load()

	v := s.Send(context.Background(), testMessage())
	if v.Outcome != sdk.OutcomeTransient {
		t.Errorf("verdict %v (%s); want TRANSIENT", v.Outcome, v.Detail)
	}
	// Every request was counted before its connection closed, which was
	// before Send returned.
	if got := requests.Load() - before; got < 1 || got > maxAttempts {
		t.Errorf("the receiver got the message %d times in one send (%s); want 1 to %d", got, v.Detail, maxAttempts)
	}
}
