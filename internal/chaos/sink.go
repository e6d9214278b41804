package chaos

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RefusedPrefix marks recipients the sink refuses with 400: the plugin calls
// that permanent, so these notifications must end FAILED (and only these).
const RefusedPrefix = "refuse-"

// Sink is the recording webhook receiver every instance delivers to. It logs
// each delivery by its webhook-id (the notification's idempotency key),
// answers 400 for refused recipients, 503 for a small random share of the
// others (exercising retries), and 200 otherwise, each after a short random
// delay: a provider is never instant, and that delay is what opens the
// duplicate window between the provider's answer and the SENT commit.
type Sink struct {
	URL string

	srv       *http.Server
	transient float64 // share of answers that are 503
	maxDelay  time.Duration

	mu   sync.Mutex
	byID map[string]*Deliveries

	accepted, refused, unavailable atomic.Int64
}

// Deliveries is what the sink saw of one webhook-id.
type Deliveries struct {
	Accepted int       // answered 2xx
	FirstOK  time.Time // when the first 2xx answer went out
	Refused  int       // answered 400
	// Again is when the 2xx answers after the first went out (the
	// duplicates), the first maxAgain of them: the report attributes each
	// duplicate to the fault before it.
	Again []time.Time
}

// maxAgain bounds Deliveries.Again: a notification delivered more often
// than that keeps its count exact, its later times are the last one kept.
const maxAgain = 8

// AgainAt is when duplicate i (0: the second 2xx) of d went out.
func (d Deliveries) AgainAt(i int) time.Time {
	if len(d.Again) == 0 {
		return d.FirstOK
	}
	return d.Again[min(i, len(d.Again)-1)]
}

// StartSink listens on a free loopback port.
func StartSink(transient float64, maxDelay time.Duration) (*Sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{URL: "http://" + ln.Addr().String() + "/hook", transient: transient,
		maxDelay: maxDelay, byID: map[string]*Deliveries{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var env struct {
		Recipient string `json:"recipient"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	status := http.StatusOK
	switch {
	case strings.HasPrefix(env.Recipient, RefusedPrefix):
		status = http.StatusBadRequest
	case rand.Float64() < s.transient:
		status = http.StatusServiceUnavailable
	}
	if s.maxDelay > 0 {
		time.Sleep(rand.N(s.maxDelay))
	}
	// Recorded as the answer goes out: a delivery counts once the provider
	// has said yes.
	id := r.Header.Get("Idempotency-Key") // the notification's idempotency key (webhook-id is msg_<id>)
	now := time.Now()
	s.mu.Lock()
	d := s.byID[id]
	if d == nil {
		d = &Deliveries{}
		s.byID[id] = d
	}
	switch status {
	case http.StatusOK:
		d.Accepted++
		if d.FirstOK.IsZero() {
			d.FirstOK = now
		} else if len(d.Again) < maxAgain {
			d.Again = append(d.Again, now)
		}
		s.accepted.Add(1)
	case http.StatusBadRequest:
		d.Refused++
		s.refused.Add(1)
	default:
		s.unavailable.Add(1)
	}
	s.mu.Unlock()
	w.WriteHeader(status)
	if status != http.StatusOK {
		_, _ = io.WriteString(w, `{"error":"chaos sink: `+http.StatusText(status)+`"}`)
	}
}

// Counts are the sink's answers so far: 2xx, 400 and 503.
func (s *Sink) Counts() (accepted, refused, unavailable int64) {
	return s.accepted.Load(), s.refused.Load(), s.unavailable.Load()
}

// Snapshot returns what the sink saw, by webhook-id.
func (s *Sink) Snapshot() map[string]Deliveries {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Deliveries, len(s.byID))
	for id, d := range s.byID {
		c := *d
		c.Again = slices.Clone(d.Again)
		out[id] = c
	}
	return out
}

// Close stops the sink.
func (s *Sink) Close() { _ = s.srv.Close() }
