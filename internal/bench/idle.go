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
	// Latency runs from the start of the Insert call (the application's
	// enqueue) to the sink receiving the notification.
	Latency Dist `json:"insert_to_received"`
	// Insert is how long the Insert call itself took (included above).
	Insert     Dist `json:"insert"`
	Duplicates int  `json:"duplicates"`
}

// idle inserts K notifications one at a time, due now, and waits for each.
func (e *env) idle(ctx context.Context) (Idle, error) {
	k := e.o.Idle
	r := Idle{K: k}
	e.sink.Reset()
	e.progress("idle pick-up: %d single notifications, one at a time", k)
	lat := make([]time.Duration, 0, k)
	ins := make([]time.Duration, 0, k)
	for i := range k {
		sleepCtx(ctx, idleGap)
		key := "idle:" + e.runID + ":" + strconv.Itoa(i)
		t0 := time.Now()
		if _, err := e.store.Insert(ctx, []outbox.NewNotification{{
			Channel: Channel, Recipient: recipient(i), Payload: payload, IdempotencyKey: key,
		}}); err != nil {
			return r, fmt.Errorf("bench: idle pick-up: insert %d: %w", i, err)
		}
		ins = append(ins, time.Since(t0))
		wctx, cancel := context.WithTimeout(ctx, idleWait)
		at, err := e.sink.Wait(wctx, key)
		cancel()
		if err != nil {
			return r, fmt.Errorf("bench: idle pick-up: notification %d of %d not delivered within %s: %w", i+1, k, idleWait, err)
		}
		lat = append(lat, at.Sub(t0))
	}
	slices.Sort(lat)
	slices.Sort(ins)
	r.Latency, r.Insert = distOf(lat), distOf(ins)
	r.Duplicates = e.sink.Counts().Duplicates
	return r, nil
}
