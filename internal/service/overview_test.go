package service

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/testenv"
)

func TestRing_Items(t *testing.T) {
	t.Parallel()
	r := newRing[int](3)
	for i, want := range [][]int{{1}, {1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5, 6}, {5, 6, 7}} {
		r.push(i + 1)
		if got := r.items(); !slices.Equal(got, want) {
			t.Errorf("after %d pushes: %v, want %v", i+1, got, want)
		}
	}
	got := r.items()
	got[0] = 99
	if r.items()[0] == 99 {
		t.Error("items shares the ring's memory")
	}
}

func TestCounter_Rates(t *testing.T) {
	t.Parallel()
	s := newCounter(nil, time.Second, 4, hclog.NewNullLogger(), nil)
	t0 := time.Unix(1_700_000_000, 0)
	for i, sent := range []map[string]int64{
		{"a": 0},
		{"a": 10, "b": 5}, // b appears: counts from 0
		{"a": 10, "b": 5},
		{"a": 4, "b": 25}, // a went down (rows deleted): 0, not negative
		{"a": 24, "b": 25},
	} {
		s.ring.push(point{at: t0.Add(time.Duration(i) * 2 * time.Second), sent: sent})
	}
	// The ring holds 4 points: the first one is gone.
	for ch, want := range map[string][]float64{"a": {0, 0, 10}, "b": {0, 10, 0}, "c": {0, 0, 0}} {
		var got []float64
		for _, r := range s.rates(ch) {
			got = append(got, r.PerSec)
		}
		if !slices.Equal(got, want) {
			t.Errorf("rates of %s: %v, want %v", ch, got, want)
		}
	}
}

// TestCounter_Sample counts real rows: SENT rows added between two samples
// show as throughput, per channel.
func TestCounter_Sample(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	store := testenv.Store(t, db.Pool)
	ctx := testenv.Context(t)
	s := newCounter(store, time.Second, 10, hclog.NewNullLogger(), nil)
	sent := func(channel string, n int) {
		t.Helper()
		_, err := db.Pool.Exec(ctx, `INSERT INTO notifications (channel, recipient, payload, status, sent_at)
SELECT $1, 'r' || g, '{}', 'SENT', now() FROM generate_series(1, $2) g`, channel, n)
		if err != nil {
			t.Fatal(err)
		}
	}
	sent("a", 5)
	s.count(ctx)
	sent("a", 30)
	sent("b", 12)
	if _, err := store.Insert(ctx, []outbox.NewNotification{{Channel: "b", Recipient: "x", Payload: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	s.count(ctx)

	counts, at, err := s.get(ctx, -1)
	if err != nil || at.IsZero() {
		t.Fatalf("counts: at %v, err %v", at, err)
	}
	if got := fmt.Sprint(counts); got != "map[a:map[SENT:35] b:map[PENDING:1 SENT:12]]" {
		t.Errorf("counts %s", got)
	}
	for ch, sentBetween := range map[string]float64{"a": 30, "b": 12} {
		rs := s.rates(ch)
		if len(rs) != 1 {
			t.Fatalf("%s: %d rates, want 1", ch, len(rs))
		}
		// The samples are ≥100ms and well under 10s apart.
		if rs[0].PerSec <= sentBetween/10 || rs[0].PerSec > sentBetween*10 {
			t.Errorf("%s: %g/s for %g sent between samples", ch, rs[0].PerSec, sentBetween)
		}
	}
}
