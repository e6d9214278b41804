package peers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Sink paths: every system POSTs to HookPath; the coordinator reads the
// counts from StatsPath and waits on WaitPath.
const (
	HookPath  = "/hook"
	StatsPath = "/_stats"
	WaitPath  = "/_wait"
)

// hookBody is what the sink decodes from every request: the envelope the
// webhook plugin sends (internal/bench.Envelope), the payload parsed in full,
// as a receiver that acts on it would.
type hookBody struct {
	ID        int64          `json:"id"`
	Channel   string         `json:"channel"`
	Recipient string         `json:"recipient"`
	Payload   map[string]any `json:"payload"`
	Attempt   int            `json:"attempt"`
	CreatedAt time.Time      `json:"created_at"`
}

// sink is the shared receiver, run as a process of its own (runSink) so its
// CPU time is counted apart from every system's. It decodes each body as
// JSON, counts distinct notifications (by the Idempotency-Key header, else
// the body's id) and answers 200; a body that does not decode is 400.
type sink struct {
	mu      sync.Mutex
	first   map[string]int64 // key → first arrival, unix ns
	total   int              // requests decoded
	bad     int              // requests refused
	lastNew int64            // unix ns of the latest first arrival
	conns   int              // connections accepted
	waiters []sinkWaiter
}

type sinkWaiter struct {
	n  int
	ch chan struct{}
}

// SinkStats is what the sink saw: StatsPath's answer.
type SinkStats struct {
	Distinct   int   `json:"distinct"`
	Deliveries int   `json:"deliveries"`
	Bad        int   `json:"bad"`
	Conns      int   `json:"connections"` // accepted: a client that keeps its connections alive opens few
	FirstNs    int64 `json:"first_ns"`    // the earliest first arrival
	LastNs     int64 `json:"last_ns"`     // the latest first arrival
	P50Ns      int64 `json:"p50_ns"`      // first arrivals, nearest rank
	P99Ns      int64 `json:"p99_ns"`
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case HookPath:
		s.hook(w, r)
	case StatsPath:
		s.mu.Lock()
		st := s.statsLocked()
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	case WaitPath:
		s.wait(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *sink) hook(w http.ResponseWriter, r *http.Request) {
	var b hookBody
	err := json.NewDecoder(r.Body).Decode(&b)
	_, _ = io.Copy(io.Discard, r.Body)
	now := time.Now().UnixNano()
	key := r.Header.Get("Idempotency-Key")
	if key == "" && err == nil && b.ID != 0 {
		key = strconv.FormatInt(b.ID, 10)
	}
	s.mu.Lock()
	if err != nil || key == "" {
		s.bad++
		s.mu.Unlock()
		http.Error(w, "want a JSON envelope with an Idempotency-Key header or an id", http.StatusBadRequest)
		return
	}
	s.total++
	if _, seen := s.first[key]; !seen {
		s.first[key] = now
		s.lastNew = now
		n := len(s.first)
		kept := s.waiters[:0]
		for _, wt := range s.waiters {
			if n >= wt.n {
				close(wt.ch)
			} else {
				kept = append(kept, wt)
			}
		}
		s.waiters = kept
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// wait answers once n distinct notifications have arrived, or after
// timeout (a Go duration), with the stats either way.
func (s *sink) wait(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	timeout, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || timeout <= 0 {
		timeout = time.Second
	}
	s.mu.Lock()
	var ch chan struct{}
	if len(s.first) < n {
		ch = make(chan struct{})
		s.waiters = append(s.waiters, sinkWaiter{n: n, ch: ch})
	}
	s.mu.Unlock()
	if ch != nil {
		t := time.NewTimer(timeout)
		select {
		case <-ch:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	// Counts only: the percentiles sort every arrival, which the stats
	// read once, after the timed phase.
	s.mu.Lock()
	st := SinkStats{Distinct: len(s.first), Deliveries: s.total, Bad: s.bad, LastNs: s.lastNew, Conns: s.conns}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

func (s *sink) statsLocked() SinkStats {
	st := SinkStats{Distinct: len(s.first), Deliveries: s.total, Bad: s.bad, LastNs: s.lastNew, Conns: s.conns}
	if len(s.first) == 0 {
		return st
	}
	at := make([]int64, 0, len(s.first))
	for _, t := range s.first {
		at = append(at, t)
	}
	slices.Sort(at)
	rank := func(p float64) int64 { return at[max(0, int(p*float64(len(at))+0.999999)-1)] }
	st.FirstNs, st.P50Ns, st.P99Ns = at[0], rank(0.50), rank(0.99)
	return st
}

// runSink is the sink process: it listens on a free loopback port, prints
// "ready <url>" and serves until its standard input closes.
func runSink(args []string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("sink: listen on loopback: %w", err)
	}
	s := &sink{first: map[string]int64{}}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute,
		ConnState: func(_ net.Conn, state http.ConnState) {
			if state == http.StateNew {
				s.mu.Lock()
				s.conns++
				s.mu.Unlock()
			}
		}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("ready http://%s\n", ln.Addr())
	waitStdinClosed()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// waitStdinClosed returns when the coordinator closes this child's standard
// input (or dies).
func waitStdinClosed() {
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
}

// sinkClient is the coordinator's side of a sink process.
type sinkClient struct {
	url string
	hc  *http.Client
}

func (c *sinkClient) get(ctx context.Context, path string) (SinkStats, error) {
	var st SinkStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+path, nil)
	if err != nil {
		return st, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return st, fmt.Errorf("sink: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("sink: %s answered %s", path, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Stats reads the counts.
func (c *sinkClient) Stats(ctx context.Context) (SinkStats, error) { return c.get(ctx, StatsPath) }

// Wait blocks up to timeout for n distinct notifications and returns the
// counts either way.
func (c *sinkClient) Wait(ctx context.Context, n int, timeout time.Duration) (SinkStats, error) {
	return c.get(ctx, fmt.Sprintf("%s?n=%d&timeout=%s", WaitPath, n, timeout))
}
