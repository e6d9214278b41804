package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/notifyd/notifyd/core/outbox"
)

// idleGap separates the single notifications, so each one finds the
// pipeline idle: the previous one settled, the fetchers blocked again.
const idleGap = 20 * time.Millisecond

// idleWait bounds the wait for one single notification.
const idleWait = 10 * time.Second

// Idle is the result of the idle pick-up phase.
type Idle struct {
	K int `json:"k"`
	// Latency is the pick-up latency: from the Insert call returning (the
	// row committed, visible to notifyd) to the sink receiving it.
	Latency Dist `json:"committed_to_received"`
	// FromInsert runs from the start of the Insert call (the application's
	// enqueue, its own write included) to the sink receiving it.
	FromInsert Dist `json:"insert_to_received"`
	// Insert is how long the Insert call itself took.
	Insert     Dist `json:"insert"`
	Duplicates int  `json:"duplicates"`
	// Breakdown splits Latency at the engine's hooks.
	Breakdown IdleBreakdown `json:"breakdown"`
}

// IdleBreakdown is where an idle notification's time goes.
type IdleBreakdown struct {
	Insert  Dist `json:"insert"`   // the application's Insert call
	ToFetch Dist `json:"to_fetch"` // commit → NOTIFY → relay → push → fetched
	Claim   Dist `json:"claim"`    // fetched → claimed in Postgres
	ToSink  Dist `json:"to_sink"`  // claimed → gRPC → plugin → HTTP → the sink has it
}

// idle inserts K notifications one at a time, due now, and waits for each.
func (e *env) idle(ctx context.Context) (Idle, error) {
	k := e.o.Idle
	r := Idle{K: k}
	e.sink.Reset()
	e.progress("idle pick-up: %d single notifications, one at a time", k)
	e.tracer.reset(true)
	defer e.tracer.reset(false)
	type single struct {
		id                   int64
		start, inserted, got time.Time
	}
	singles := make([]single, 0, k)
	for i := range k {
		sleepCtx(ctx, idleGap)
		key := "idle:" + e.runID + ":" + strconv.Itoa(i)
		t0 := time.Now()
		res, err := e.store.Insert(ctx, []outbox.NewNotification{{
			Channel: Channel, Recipient: recipient(i), Payload: payload, IdempotencyKey: key,
		}})
		if err != nil {
			return r, fmt.Errorf("bench: idle pick-up: insert %d: %w", i, err)
		}
		t1 := time.Now()
		wctx, cancel := context.WithTimeout(ctx, idleWait)
		at, err := e.sink.Wait(wctx, key)
		cancel()
		if err != nil {
			return r, fmt.Errorf("bench: idle pick-up: notification %d of %d not delivered within %s: %w", i+1, k, idleWait, err)
		}
		singles = append(singles, single{res[0].ID, t0, t1, at})
	}
	var lat, from, ins, toFetch, claim, toSink []time.Duration
	for _, s := range singles {
		lat = append(lat, s.got.Sub(s.inserted))
		from = append(from, s.got.Sub(s.start))
		ins = append(ins, s.inserted.Sub(s.start))
		if tr, ok := e.tracer.trace(s.id); ok && !tr.fetched.IsZero() && !tr.claimed.IsZero() {
			toFetch = append(toFetch, tr.fetched.Sub(s.inserted))
			claim = append(claim, tr.claimed.Sub(tr.fetched))
			toSink = append(toSink, s.got.Sub(tr.claimed))
		}
	}
	for _, d := range [][]time.Duration{lat, from, ins, toFetch, claim, toSink} {
		slices.Sort(d)
	}
	r.Latency, r.FromInsert, r.Insert = distOf(lat), distOf(from), distOf(ins)
	r.Breakdown = IdleBreakdown{Insert: r.Insert, ToFetch: distOf(toFetch), Claim: distOf(claim), ToSink: distOf(toSink)}
	r.Duplicates = e.sink.Counts().Duplicates
	return r, nil
}
