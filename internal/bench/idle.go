package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/internal/outbox"
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
	// ToNotify and NotifyToFetch split ToFetch at the moment a listener of
	// the bench's own (like the engine's) received the insert's NOTIFY.
	ToNotify      Dist `json:"to_notify"`
	NotifyToFetch Dist `json:"notify_to_fetch"`
	Claim         Dist `json:"claim"`   // fetched → claimed in Postgres
	ToSink        Dist `json:"to_sink"` // claimed → gRPC → plugin → HTTP → the sink has it
}

// listen receives the outbox's insert NOTIFYs on a connection of its own
// and sends when each arrived, until ctx ends.
func (e *env) listen(ctx context.Context) (<-chan time.Time, error) {
	ch, err := e.store.NotifyChannel(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, e.cfg.Postgres.URL)
	if err != nil {
		return nil, fmt.Errorf("bench: listen for outbox inserts: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("bench: listen for outbox inserts: %w", err)
	}
	out := make(chan time.Time, 16)
	go func() {
		defer conn.Close(context.WithoutCancel(ctx))
		for {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				return
			}
			select {
			case out <- time.Now():
			default:
			}
		}
	}()
	return out, nil
}

// idle inserts K notifications one at a time, due now, and waits for each.
func (e *env) idle(ctx context.Context) (Idle, error) {
	k := e.o.Idle
	r := Idle{K: k}
	e.sink.Reset()
	e.progress("idle pick-up: %d single notifications, one at a time", k)
	e.tracer.reset(true)
	defer e.tracer.reset(false)
	lctx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	notified, err := e.listen(lctx)
	if err != nil {
		return r, err
	}
	type single struct {
		id                             int64
		start, inserted, notified, got time.Time
	}
	singles := make([]single, 0, k)
	for i := range k {
		sleepCtx(ctx, idleGap)
		for len(notified) > 0 {
			<-notified // stale: a wake for an earlier insert
		}
		key := "idle:" + e.runID + ":" + strconv.Itoa(i)
		t0 := time.Now()
		res, err := e.store.Insert(ctx, []outbox.NewNotification{{
			Channel: Channel, Recipient: recipient(i), Payload: payload, IdempotencyKey: key, TraceParent: e.traceParent(),
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
		var nt time.Time
		select {
		case nt = <-notified:
		default: // the trigger only notifies while the relay is idle
		}
		singles = append(singles, single{res[0].ID, t0, t1, nt, at})
	}
	var lat, from, ins, toFetch, toNotify, notifyToFetch, claim, toSink []time.Duration
	for _, s := range singles {
		lat = append(lat, s.got.Sub(s.inserted))
		from = append(from, s.got.Sub(s.start))
		ins = append(ins, s.inserted.Sub(s.start))
		if tr, ok := e.tracer.trace(s.id); ok && !tr.fetched.IsZero() && !tr.claimed.IsZero() {
			toFetch = append(toFetch, tr.fetched.Sub(s.inserted))
			claim = append(claim, tr.claimed.Sub(tr.fetched))
			toSink = append(toSink, s.got.Sub(tr.claimed))
			if !s.notified.IsZero() {
				// The NOTIFY is sent at commit, which may be seen before
				// the Insert call returns: then it counts as 0.
				from := s.notified
				if from.Before(s.inserted) {
					from = s.inserted
				}
				toNotify = append(toNotify, from.Sub(s.inserted))
				notifyToFetch = append(notifyToFetch, tr.fetched.Sub(from))
			}
		}
	}
	for _, d := range [][]time.Duration{lat, from, ins, toFetch, toNotify, notifyToFetch, claim, toSink} {
		slices.Sort(d)
	}
	r.Latency, r.FromInsert, r.Insert = distOf(lat), distOf(from), distOf(ins)
	r.Breakdown = IdleBreakdown{Insert: r.Insert, ToFetch: distOf(toFetch), ToNotify: distOf(toNotify),
		NotifyToFetch: distOf(notifyToFetch), Claim: distOf(claim), ToSink: distOf(toSink)}
	r.Duplicates = e.sink.Counts().Duplicates
	return r, nil
}

// one inserts one notification and waits for the sink to receive it: the
// committed→received latency (i makes its key unique).
func (e *env) one(ctx context.Context, i int) (time.Duration, error) {
	sleepCtx(ctx, idleGap)
	key := "one:" + e.runID + ":" + strconv.Itoa(i)
	if _, err := e.store.Insert(ctx, []outbox.NewNotification{{
		Channel: Channel, Recipient: recipient(i), Payload: payload, IdempotencyKey: key, TraceParent: e.traceParent(),
	}}); err != nil {
		return 0, fmt.Errorf("bench: insert single %d: %w", i, err)
	}
	t1 := time.Now()
	wctx, cancel := context.WithTimeout(ctx, idleWait)
	defer cancel()
	at, err := e.sink.Wait(wctx, key)
	if err != nil {
		return 0, fmt.Errorf("bench: single notification %d not delivered within %s: %w", i, idleWait, err)
	}
	return at.Sub(t1), nil
}
