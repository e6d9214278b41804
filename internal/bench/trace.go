package bench

import (
	"slices"
	"sync"
	"time"

	"github.com/notifyd/notifyd/internal/delivery"
)

// tracer times the pipeline's stages through the engine's hooks, which run
// once per batch: after fetch, after claim, after the plugin answered, after
// settle. Per batch it records how long the claim and the send took; per id
// (only while perID is on, in the idle phase) when each stage was reached;
// per instance how many notifications it sent.
type tracer struct {
	mu      sync.Mutex
	fetched map[int64]time.Time // batch's first id → fetched at
	claimed map[int64]time.Time // batch's first sent id → claimed at
	claims  []time.Duration     // fetch → claimed, per batch
	sends   []time.Duration     // claimed → plugin answered, per batch
	sizes   []int               // ids per fetched batch
	first   time.Time           // first fetch since reset
	sentBy  []int               // notifications handed to the plugin, per instance

	perID bool
	ids   map[int64]*idTrace
}

type idTrace struct{ fetched, claimed, sent, settled time.Time }

// newTracer traces the given number of instances' engines.
func newTracer(instances int) *tracer {
	t := &tracer{sentBy: make([]int, instances)}
	t.reset(false)
	return t
}

// reset forgets everything; perID turns per-id recording on or off.
func (t *tracer) reset(perID bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fetched, t.claimed = map[int64]time.Time{}, map[int64]time.Time{}
	t.claims, t.sends, t.sizes = nil, nil, nil
	t.first = time.Time{}
	clear(t.sentBy)
	t.perID, t.ids = perID, map[int64]*idTrace{}
}

// hooks are instance i's engine hooks.
func (t *tracer) hooks(i int) delivery.Hooks {
	return delivery.Hooks{
		AfterFetch: func(_ string, ids []int64) error {
			now := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.first.IsZero() {
				t.first = now
			}
			t.fetched[ids[0]] = now
			t.sizes = append(t.sizes, len(ids))
			t.each(ids, func(x *idTrace) { x.fetched = now })
			return nil
		},
		AfterClaim: func(_ string, ids []int64) error {
			now := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			if at, ok := t.fetched[ids[0]]; ok {
				t.claims = append(t.claims, now.Sub(at))
				delete(t.fetched, ids[0])
			}
			t.claimed[ids[0]] = now
			t.each(ids, func(x *idTrace) { x.claimed = now })
			return nil
		},
		AfterSend: func(_ string, ids []int64) error {
			now := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			// A streamed call's verdicts come back in answers of a few ids,
			// so the batch's first id may be in any of them: the send is
			// timed by the answer that carries it.
			for _, id := range ids {
				if at, ok := t.claimed[id]; ok {
					t.sends = append(t.sends, now.Sub(at))
					delete(t.claimed, id)
				}
			}
			t.sentBy[i] += len(ids)
			t.each(ids, func(x *idTrace) { x.sent = now })
			return nil
		},
		AfterSettle: func(_ string, ids []int64) error {
			now := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			t.each(ids, func(x *idTrace) { x.settled = now })
			return nil
		},
	}
}

// each applies f to the per-id traces of ids, when per-id tracing is on.
func (t *tracer) each(ids []int64, f func(*idTrace)) {
	if !t.perID {
		return
	}
	for _, id := range ids {
		x := t.ids[id]
		if x == nil {
			x = &idTrace{}
			t.ids[id] = x
		}
		f(x)
	}
}

// Stages is how long the engine's per-batch stages took during a burst.
type Stages struct {
	Batches   int     `json:"batches"`
	MeanBatch float64 `json:"mean_batch"`
	// FirstFetchMs: the first fetched batch, after T (relay + push + fetch).
	FirstFetchMs float64 `json:"first_fetch_ms"`
	Claim        Dist    `json:"claim"` // fetched → claimed in Postgres
	Send         Dist    `json:"send"`  // claimed → the plugin's verdicts back (gRPC + HTTP)
}

func (t *tracer) stages(due time.Time) Stages {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Stages{Batches: len(t.sizes)}
	total := 0
	for _, n := range t.sizes {
		total += n
	}
	if s.Batches > 0 {
		s.MeanBatch = float64(total) / float64(s.Batches)
		s.FirstFetchMs = ms(t.first.Sub(due))
	}
	claims, sends := slices.Clone(t.claims), slices.Clone(t.sends)
	slices.Sort(claims)
	slices.Sort(sends)
	s.Claim, s.Send = distOf(claims), distOf(sends)
	return s
}

// sent returns how many notifications each instance handed to its plugin
// since the last reset (a retried one counts again).
func (t *tracer) sent() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.sentBy)
}

// trace returns the per-id trace of id, if recorded.
func (t *tracer) trace(id int64) (idTrace, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	x, ok := t.ids[id]
	if !ok {
		return idTrace{}, false
	}
	return *x, true
}
