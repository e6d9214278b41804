package sdktest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DroppingReceiver is an HTTP receiver on 127.0.0.1 for testing what a
// sender does when a receiver takes a request and closes the connection
// without an answer, after earlier requests left idle keep-alive
// connections behind: net/http replays a request carrying an
// Idempotency-Key on every reused connection that fails before the answer,
// which sends a message once per idle connection (sdk.ReplayOnce bounds it).
//
// It answers the first request on each of its first warm connections with
// 200 once all of them are open, so the client keeps that many idle; after
// Drop it reads every request whole, counts it (Dropped) and closes its
// connection unanswered. It stops with the test.
type DroppingReceiver struct {
	URL      string // http://127.0.0.1:port + path
	drop     atomic.Bool
	requests atomic.Int64
}

// NewDroppingReceiver starts a DroppingReceiver whose URL ends in path.
func NewDroppingReceiver(t testing.TB, path string, warm int) *DroppingReceiver {
	t.Helper()
	s := &DroppingReceiver{}
	var (
		mu     sync.Mutex
		opened int
		allIn  = make(chan struct{})
	)
	s.URL, _ = RawReceiver(t, path, func(c net.Conn) bool {
		if s.drop.Load() {
			s.requests.Add(1)
			return false
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
		return true
	})
	return s
}

// Drop makes the receiver close every later request's connection unanswered.
func (s *DroppingReceiver) Drop() { s.drop.Store(true) }

// Dropped is how many requests it has read whole and left unanswered.
func (s *DroppingReceiver) Dropped() int64 { return s.requests.Load() }
