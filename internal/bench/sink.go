package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Sink paths: the pipeline's webhook channel posts to HookPath, the raw
// baseline to RawPath, so the two are counted apart on the same server.
const (
	HookPath = "/hook"
	RawPath  = "/raw"
)

// Sink is the in-process HTTP receiver both the pipeline and the raw
// baseline post to. It answers 200 with an empty body, and per Idempotency-Key
// remembers how many times it came and when it first arrived.
type Sink struct {
	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex
	hooks   map[string]*arrival
	raw     int
	bad     int // requests without an Idempotency-Key
	target  int // when distinct hooks reach target, reached is closed
	reached chan struct{}
	waiters map[string]chan struct{}
}

type arrival struct {
	first time.Time
	count int
}

// StartSink listens on a free loopback port and serves until Close.
func StartSink() (*Sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: start the sink on loopback: %w", err)
	}
	s := &Sink{ln: ln, hooks: map[string]*arrival{}, waiters: map[string]chan struct{}{}}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		// The default of 1 MB per request header is fine; idle keep-alive
		// connections must outlive the pauses between phases.
		IdleTimeout: 5 * time.Minute,
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the sink's base URL (http://127.0.0.1:port).
func (s *Sink) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server and drops its connections.
func (s *Sink) Close() error { return s.srv.Close() }

// ServeHTTP counts one request. The body is read to the end, as any real
// receiver would, so connections are reused and the cost is honest.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	now := time.Now()
	id := r.Header.Get("Idempotency-Key") // the notification's key (webhook-id is msg_<id>)
	raw := r.URL.Path == RawPath

	s.mu.Lock()
	switch {
	case id == "":
		s.bad++
	case raw:
		s.raw++
	default:
		s.deliverLocked(id, now)
	}
	s.mu.Unlock()
	if id == "" {
		http.Error(w, "missing Idempotency-Key header", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// deliver records one notification's arrival by its key (the AlimTalk fake
// partner's path, where one request carries many notifications).
func (s *Sink) deliver(id string, now time.Time) {
	s.mu.Lock()
	s.deliverLocked(id, now)
	s.mu.Unlock()
}

func (s *Sink) deliverLocked(id string, now time.Time) {
	a := s.hooks[id]
	if a != nil {
		a.count++
		return
	}
	s.hooks[id] = &arrival{first: now, count: 1}
	if s.reached != nil && len(s.hooks) >= s.target {
		close(s.reached)
		s.reached = nil
	}
	if ch, ok := s.waiters[id]; ok {
		close(ch)
		delete(s.waiters, id)
	}
}

// Reset forgets every delivery, between phases.
func (s *Sink) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = map[string]*arrival{}
	s.raw, s.bad = 0, 0
	s.target, s.reached = 0, nil
	s.waiters = map[string]chan struct{}{}
}

// WaitDistinct blocks until the sink has seen n distinct idempotency keys since
// the last Reset, or ctx ends.
func (s *Sink) WaitDistinct(ctx context.Context, n int) error {
	s.mu.Lock()
	if len(s.hooks) >= n {
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	s.target, s.reached = n, ch
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait blocks until the notification keyed id has arrived (or ctx ends) and returns when
// it first arrived.
func (s *Sink) Wait(ctx context.Context, id string) (time.Time, error) {
	s.mu.Lock()
	if a := s.hooks[id]; a != nil {
		s.mu.Unlock()
		return a.first, nil
	}
	ch, ok := s.waiters[id]
	if !ok {
		ch = make(chan struct{})
		s.waiters[id] = ch
	}
	s.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hooks[id].first, nil
}

// SinkCounts is what the sink has seen since the last Reset.
type SinkCounts struct {
	Distinct   int // distinct idempotency keys posted to HookPath
	Deliveries int // every request to HookPath
	Duplicates int // Deliveries - Distinct: repeats of an id already seen
	Raw        int // requests to RawPath
	Bad        int // requests without an Idempotency-Key
}

// Counts returns the counters.
func (s *Sink) Counts() SinkCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := SinkCounts{Distinct: len(s.hooks), Raw: s.raw, Bad: s.bad}
	for _, a := range s.hooks {
		c.Deliveries += a.count
	}
	c.Duplicates = c.Deliveries - c.Distinct
	return c
}

// Arrivals returns each distinct key's first arrival time.
func (s *Sink) Arrivals() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]time.Time, len(s.hooks))
	for id, a := range s.hooks {
		out[id] = a.first
	}
	return out
}
