package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/sdk"
)

// warmThenDrop is a callback receiver on 127.0.0.1 that answers the first
// request on each of its first warm connections with 200 once all of them
// are open (so the plugin keeps that many idle connections), and from then
// on reads every request whole, counts it and closes its connection without
// an answer, as a receiver that crashes on the callback does.
type warmThenDrop struct {
	url      string
	drop     atomic.Bool
	requests atomic.Int64 // requests read whole while dropping
}

func newWarmThenDrop(t *testing.T, warm int) *warmThenDrop {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &warmThenDrop{url: "http://" + ln.Addr().String() + "/cb"}
	var (
		mu     sync.Mutex
		opened int
		allIn  = make(chan struct{})
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if s.drop.Load() {
						s.requests.Add(1)
						return
					}
					mu.Lock()
					if opened++; opened == warm {
						close(allIn)
					}
					mu.Unlock()
					select {
					case <-allIn:
					case <-time.After(10 * time.Second):
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				}
			}()
		}
	}()
	return s
}

// TestSender_Send_callbackDroppedAfterTheRequest: a callback receiver that
// reads the callback and closes the connection unanswered may have acted on
// it. net/http replays a request carrying an Idempotency-Key (every callback
// does) when a reused connection fails before the answer's first byte, on
// every idle connection in turn and then on a new one: one Send posted the
// embeddings to the receiver once per idle connection plus one (the plugin's
// transport keeps 64 a host). At most one replay now, as sdk.HTTPSender.
func TestSender_Send_callbackDroppedAfterTheRequest(t *testing.T) {
	t.Parallel()
	const warm = 8
	f, cb := newFakeVoyage(t), newWarmThenDrop(t, warm)
	raw, _ := json.Marshal(map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5",
		"callback_url": cb.url, "rpm": 0, "tpm": 0})
	s, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "embed", Config: raw, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range warm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := message(`{"input":"a"}`)
			m.ID, m.IdempotencyKey = int64(100+i), ""
			if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
				t.Errorf("warm-up send %d: %v (%s)", i, v.Outcome, v.Detail)
			}
		}()
	}
	wg.Wait()
	cb.drop.Store(true)

	v := s.Send(context.Background(), message(`{"input":"a"}`))
	if v.Outcome != sdk.OutcomeTransient {
		t.Errorf("verdict %v (%s); want TRANSIENT", v.Outcome, v.Detail)
	}
	// Every callback was counted before its connection closed, which was
	// before the send returned.
	if got := cb.requests.Load(); got < 1 || got > 2 {
		t.Errorf("the receiver got the callback %d times in one send (%s); want 1 or 2", got, v.Detail)
	}
}
