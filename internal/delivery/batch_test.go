package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

// batchSink is the provider behind testdata/batchhook: each request carries
// a batch; it answers per item, by id, in reverse order (so a verdict only
// reaches its message when the plugin matches by id).
type batchSink struct {
	srv *httptest.Server
	// status decides request n's HTTP status (1 = first); nil: 200.
	status func(n int) int
	// item decides an item's answer in a 2xx request from its id and how
	// many 2xx requests carried it before; nil: "ok".
	item func(id int64, before int) string

	mu       sync.Mutex
	sizes    []int         // items per request, in arrival order
	batches  [][]int64     // ids per request, in arrival order
	accepted map[int64]int // id → times answered "ok"
	seen     map[int64]int // id → times carried by a 2xx request
	statuses map[int]int   // HTTP status → requests
}

func newBatchSink(t *testing.T, status func(n int) int, item func(id int64, before int) string) *batchSink {
	t.Helper()
	s := &batchSink{status: status, item: item, accepted: map[int64]int{}, seen: map[int64]int{}, statuses: map[int]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Items []struct {
				ID int64 `json:"id"`
			} `json:"items"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.sizes = append(s.sizes, len(req.Items))
		ids := make([]int64, len(req.Items))
		for i, it := range req.Items {
			ids[i] = it.ID
		}
		s.batches = append(s.batches, ids)
		code := http.StatusOK
		if s.status != nil {
			code = s.status(len(s.sizes))
		}
		s.statuses[code]++
		answers := make([]string, len(req.Items))
		if code/100 == 2 {
			for i, it := range req.Items {
				answers[i] = "ok"
				if s.item != nil {
					answers[i] = s.item(it.ID, s.seen[it.ID])
				}
				s.seen[it.ID]++
				if answers[i] == "ok" {
					s.accepted[it.ID]++
				}
			}
		}
		s.mu.Unlock()
		if code/100 != 2 {
			w.WriteHeader(code)
			return
		}
		type result struct {
			ID     int64  `json:"id"`
			Status string `json:"status"`
		}
		out := make([]result, 0, len(req.Items))
		for i := len(req.Items) - 1; i >= 0; i-- {
			out = append(out, result{ID: req.Items[i].ID, Status: answers[i]})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": out})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *batchSink) requests() (sizes []int, statuses map[int]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := make(map[int]int, len(s.statuses))
	for k, v := range s.statuses {
		st[k] = v
	}
	return append([]int(nil), s.sizes...), st
}

// setupBatching is setup with the test channel on testdata/batchhook (an
// sdk.BatchSender) posting to s.
func setupBatching(t *testing.T, s *batchSink, opts ...option) *bundle {
	t.Helper()
	b := setup(t, newSink(t, nil), append([]option{func(_ *config.Config, ch *config.Channel) {
		ch.Plugin = "batchhook"
		ch.Config = map[string]any{"url": s.srv.URL}
	}}, opts...)...)
	testenv.InstallPlugin(t, b.cfg.Plugins.Dir, "batchhook", "./testdata/batchhook")
	return b
}

// summary is a bounded view of request sizes for failure messages.
func summary(sizes []int) string {
	hist := map[int]int{}
	for _, n := range sizes {
		hist[n]++
	}
	return fmt.Sprintf("%d requests, items per request → count: %v", len(sizes), hist)
}

// TestEngine_BatchSize: a batching plugin's calls carry batch_size messages
// with the default concurrency (16): the concurrency counts calls in flight,
// not messages. Before, a fetch took no more messages than there were free
// send slots, so batch_size 50 made calls of at most 16 — 63 or more
// requests for 1,000 messages instead of about 20.
func TestEngine_BatchSize(t *testing.T) {
	t.Parallel()
	s := newBatchSink(t, nil, nil)
	b := setupBatching(t, s, func(_ *config.Config, ch *config.Channel) {
		ch.BatchSize = 50
		ch.Concurrency = config.FillChannel(config.Channel{}).Concurrency // the default
	})
	if got := b.cfg.Channels[testChannel].Concurrency; got != 16 {
		t.Fatalf("default concurrency %d; the test is written for 16", got)
	}
	b.engine("a", delivery.Hooks{})
	const n = 1000
	ids := b.sendMany(n, func(i int) string { return fmt.Sprintf("r%d", i) })
	counts := b.waitAll(60 * time.Second)
	if counts[outbox.StatusSent] != n {
		t.Fatalf("statuses %v, want all %d SENT", counts, n)
	}
	sizes, _ := s.requests()
	if len(sizes) > 60 {
		t.Errorf("%s; want at most 60 for %d messages in batches of 50", summary(sizes), n)
	}
	largest := 0
	for _, k := range sizes {
		largest = max(largest, k)
	}
	if largest != 50 {
		t.Errorf("%s; want requests of 50 (batch_size)", summary(sizes))
	}
	s.mu.Lock()
	var missing, repeated []int64
	for _, id := range ids {
		switch s.accepted[id] {
		case 0:
			missing = append(missing, id)
		case 1:
		default:
			repeated = append(repeated, id)
		}
	}
	s.mu.Unlock()
	if len(missing)+len(repeated) > 0 {
		t.Errorf("%d ids never accepted (first %v), %d accepted more than once (first %v); want each once",
			len(missing), missing[:min(5, len(missing))], len(repeated), repeated[:min(5, len(repeated))])
	}
	// Each verdict went to its own message: the result names the id.
	wrong := 0
	for _, id := range ids {
		nt, err := b.store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			ID int64 `json:"id"`
		}
		if json.Unmarshal(nt.Result, &res) != nil || res.ID != id {
			if wrong++; wrong <= 3 {
				t.Errorf("notification %d: result %s, want its own id", id, nt.Result)
			}
		}
	}
	if wrong > 3 {
		t.Errorf("… %d notifications in all with another's verdict", wrong)
	}
	t.Logf("%d messages: %s", n, summary(sizes))
}

// TestEngine_BreakerCountsCalls: for a batching plugin the breaker counts
// plugin calls, not messages — one request of 50 answered 503 is one
// failure (it was 50, and tripped a breaker.failures of 5 at once, holding
// a quiet channel back for the whole cooldown), while repeated failing
// requests still open it.
func TestEngine_BreakerCountsCalls(t *testing.T) {
	t.Parallel()
	breaker := func(e *delivery.Engine) string {
		for _, st := range e.Channels(context.Background()) {
			if st.Name == testChannel {
				return st.Breaker
			}
		}
		return ""
	}
	opts := func(_ *config.Config, ch *config.Channel) {
		ch.BatchSize = 50
		ch.Breaker = config.Breaker{Failures: 5, Cooldown: 5 * time.Minute, Probes: 1}
		ch.Retry = config.Retry{MaxAttempts: 1000, Base: 50 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: config.JitterFull}
	}

	t.Run("one failed request", func(t *testing.T) {
		t.Parallel()
		s := newBatchSink(t, func(n int) int {
			if n == 1 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		}, nil)
		b := setupBatching(t, s, opts)
		e := b.engine("a", delivery.Hooks{})
		// Paused while the 50 reach the ready list, so one fetch takes them
		// all: the first request carries 50.
		ctx := context.Background()
		if err := e.Pause(ctx, testChannel, "test: gather a batch"); err != nil {
			t.Fatal(err)
		}
		ids := b.sendMany(50, func(i int) string { return fmt.Sprintf("r%d", i) })
		waitReady(t, b, 50)
		// Had the 503 opened the breaker, nothing would be sent again within
		// its 5-minute cooldown (no other request is in flight to close it).
		opened := watchBreaker(t, breaker, e)
		if err := e.Resume(ctx, testChannel); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if nt := b.wait(id, 60*time.Second); nt.Status != outbox.StatusSent {
				t.Fatalf("notification %d %s (%s), want SENT", id, nt.Status, nt.LastError)
			}
		}
		sizes, statuses := s.requests()
		if len(sizes) == 0 || sizes[0] != 50 || statuses[http.StatusServiceUnavailable] != 1 {
			t.Fatalf("%s, statuses %v; want a first request of 50 answered 503", summary(sizes), statuses)
		}
		if got := breaker(e); got != "closed" || opened() {
			t.Errorf("breaker %s after one failed request of 50 (breaker.failures 5), opened on the way: %v; want closed throughout", got, opened())
		}
	})

	// A request that got some of its messages through says the provider is
	// up: its recipients' own transient answers are not a failed request.
	t.Run("mixed verdicts", func(t *testing.T) {
		t.Parallel()
		s := newBatchSink(t, nil, func(id int64, before int) string {
			if id%5 == 0 && before == 0 {
				return "retry"
			}
			return "ok"
		})
		b := setupBatching(t, s, opts)
		e := b.engine("a", delivery.Hooks{})
		opened := watchBreaker(t, breaker, e)
		b.sendMany(300, func(i int) string { return fmt.Sprintf("r%d", i) })
		counts := b.waitAll(60 * time.Second)
		if counts[outbox.StatusSent] != 300 {
			t.Fatalf("statuses %v, want all 300 SENT", counts)
		}
		s.mu.Lock()
		retried := 0
		for id, n := range s.seen {
			if id%5 == 0 && n > 1 {
				retried++
			}
		}
		s.mu.Unlock()
		if retried < 50 {
			sizes, _ := s.requests()
			t.Fatalf("only %d messages answered retry first (%s); the test wants mixed requests", retried, summary(sizes))
		}
		if got := breaker(e); got != "closed" || opened() {
			sizes, _ := s.requests()
			t.Errorf("breaker %s after %s with a fifth of each request's items answered retry once, opened on the way: %v; want closed throughout",
				got, summary(sizes), opened())
		}
	})

	t.Run("repeated failed requests", func(t *testing.T) {
		t.Parallel()
		s := newBatchSink(t, func(int) int { return http.StatusServiceUnavailable }, nil)
		b := setupBatching(t, s, opts)
		e := b.engine("a", delivery.Hooks{})
		b.sendMany(50, func(i int) string { return fmt.Sprintf("r%d", i) })
		deadline := time.Now().Add(30 * time.Second)
		for breaker(e) != "open" {
			if time.Now().After(deadline) {
				sizes, _ := s.requests()
				t.Fatalf("breaker %q after %s all answered 503, want open", breaker(e), summary(sizes))
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Open from 5 failed requests: not before (the one instance's in
		// flight when it opened may still arrive).
		time.Sleep(500 * time.Millisecond)
		sizes, _ := s.requests()
		if len(sizes) < 5 {
			t.Errorf("breaker open after %s; want at least breaker.failures (5) failed requests", summary(sizes))
		}
		counts := b.statusCounts()
		if counts[outbox.StatusSent]+counts[outbox.StatusFailed] != 0 {
			t.Errorf("statuses %v while the provider is down, want all still queued", counts)
		}
	})
}

// watchBreaker polls the breaker as e reads it until the test ends, and
// reports whether it was ever seen open.
func watchBreaker(t *testing.T, breaker func(*delivery.Engine) string, e *delivery.Engine) (opened func() bool) {
	var seen atomic.Bool
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if breaker(e) == "open" {
				seen.Store(true)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return seen.Load
}

// TestEngine_BatchingSuspects: for a batching plugin too, suspects — messages
// in flight when their process died — go out through the lane, after a first
// crash in groups of at most 16 (a request each), never in a batch of the
// channel's batch_size; after them the channel goes on in batches (no slot
// went missing).
func TestEngine_BatchingSuspects(t *testing.T) {
	t.Parallel()
	s := newBatchSink(t, nil, nil)
	b := setupBatching(t, s, func(_ *config.Config, ch *config.Channel) { ch.BatchSize = 50 })
	hit := make(chan []int64, 1)
	e := b.engine("only", delivery.Hooks{AfterClaim: crashEvery(hit)})
	ids := b.sendMany(100, func(i int) string { return fmt.Sprintf("r%d", i) })
	var crashed []int64
	select {
	case crashed = <-hit:
	case <-time.After(30 * time.Second):
		t.Fatal("no batch was claimed within 30 s")
	}
	e.Kill()
	e = b.engine("only", delivery.Hooks{})
	for _, id := range ids {
		if nt := b.wait(id, 60*time.Second); nt.Status != outbox.StatusSent {
			t.Fatalf("notification %d %s (%s), want SENT", id, nt.Status, nt.LastError)
		}
	}
	// Gathered while paused, so one fetch takes them: a batch.
	ctx := context.Background()
	if err := e.Pause(ctx, testChannel, "test: gather a batch"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	before := len(s.batches)
	s.mu.Unlock()
	later := b.sendMany(50, func(i int) string { return fmt.Sprintf("later%d", i) })
	waitReady(t, b, 50)
	if err := e.Resume(ctx, testChannel); err != nil {
		t.Fatal(err)
	}
	for _, id := range later {
		if nt := b.wait(id, 60*time.Second); nt.Status != outbox.StatusSent {
			t.Fatalf("notification %d %s (%s) after the suspects, want SENT", id, nt.Status, nt.LastError)
		}
	}
	ids = append(ids, later...)
	suspect := map[int64]bool{}
	for _, id := range crashed {
		suspect[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	grouped, over := 0, 0
	for _, req := range s.batches {
		for _, id := range req {
			if !suspect[id] {
				continue
			}
			if len(req) <= 16 {
				grouped++
			} else if over++; over <= 3 {
				t.Errorf("suspect %d sent in a request of %d, want a lane group of at most 16", id, len(req))
			}
		}
	}
	if grouped != len(crashed) || over > 0 {
		t.Errorf("%d suspects: %d sent in lane groups, %d in larger requests; want each in a group, once", len(crashed), grouped, over)
	}
	if after := s.sizes[before:]; len(after) != 1 || after[0] != 50 {
		t.Errorf("after the suspects: %s; want the 50 in one request", summary(after))
	}
	for _, id := range ids {
		if s.accepted[id] != 1 {
			t.Errorf("notification %d accepted %d times, want once", id, s.accepted[id])
			break
		}
	}
	t.Logf("%d suspects after the crash; %s", len(crashed), summary(s.sizes))

}

// waitReady waits until the channel's ready list holds n ids.
func waitReady(t *testing.T, b *bundle, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := b.queue.Stats(context.Background(), b.queues()[0])
		if err != nil {
			t.Fatal(err)
		}
		if st.Ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %+v after 30 s, want %d ready", st, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
