package api_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/wire"
)

func TestServer_DLQList(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	orders := b.deadLetter("orders", "a", "b", "c")
	alerts := b.deadLetter("alerts", "d")
	b.insert("orders", "pending") // not in the DLQ

	t.Run("every channel, lowest id first", func(t *testing.T) {
		got := decode[wire.DLQPage](t, wantStatus(t, b.do("GET", "/v1/dlq", ""), 200))
		if ids := pageIDs(got); !slices.Equal(ids, append(slices.Clone(orders), alerts...)) {
			t.Errorf("ids %v, want %v then %v", ids, orders, alerts)
		}
		if got.NextAfter != 0 {
			t.Errorf("next_after %d on the last page, want 0", got.NextAfter)
		}
		if n := got.Notifications[0]; n.Status != wire.StatusFailed || n.LastError == "" || n.History != nil {
			t.Errorf("row %+v: want FAILED with last_error and no history", n)
		}
	})
	t.Run("one channel, paged", func(t *testing.T) {
		p1, err := b.c.DLQ(b.ctx, wire.DLQQuery{Channel: "orders", Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if ids := pageIDs(*p1); !slices.Equal(ids, orders[:2]) || p1.NextAfter != orders[1] {
			t.Fatalf("page 1: ids %v next_after %d, want %v and %d", ids, p1.NextAfter, orders[:2], orders[1])
		}
		p2, err := b.c.DLQ(b.ctx, wire.DLQQuery{Channel: "orders", Limit: 2, After: p1.NextAfter})
		if err != nil {
			t.Fatal(err)
		}
		if ids := pageIDs(*p2); !slices.Equal(ids, orders[2:]) || p2.NextAfter != 0 {
			t.Errorf("page 2: ids %v next_after %d, want %v and 0", ids, p2.NextAfter, orders[2:])
		}
	})
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=-1", "after=z"} {
		t.Run("400 for "+q, func(t *testing.T) {
			param, _, _ := cutEq(q)
			wantError(t, b.do("GET", "/v1/dlq?"+q, ""), 400, wire.CodeBadRequest, "query parameter "+param)
		})
	}
}

func cutEq(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func pageIDs(p wire.DLQPage) []int64 {
	out := make([]int64, len(p.Notifications))
	for i, n := range p.Notifications {
		out[i] = n.ID
	}
	return out
}

func TestServer_DLQReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})

	t.Run("by ids: QUEUED with a fresh budget, in ready, off the dead list", func(t *testing.T) {
		ids := b.deadLetter("orders", "a", "b")
		before, err := b.engine.Stats(b.ctx, "orders")
		must(t, err)
		got, err := b.c.ReplayDLQ(b.ctx, wire.DLQSelector{IDs: ids})
		if err != nil {
			t.Fatal(err)
		}
		if got.Replayed != 2 || !slices.Equal(got.IDs, ids) || got.Warning != "" {
			t.Errorf("answer %+v, want both ids replayed", got)
		}
		for _, id := range ids {
			n, err := b.store.Get(b.ctx, id)
			must(t, err)
			if n.Status != outbox.StatusQueued || n.AttemptCount != 0 {
				t.Errorf("id %d: %s after %d attempts, want QUEUED with 0", id, n.Status, n.AttemptCount)
			}
		}
		after, err := b.engine.Stats(b.ctx, "orders")
		must(t, err)
		if after.Ready != before.Ready+2 || after.Dead != before.Dead-2 {
			t.Errorf("Redis ready %d→%d, dead %d→%d; want +2 and -2", before.Ready, after.Ready, before.Dead, after.Dead)
		}
	})

	// One behaviour with the dashboard (service.Replay): the FAILED ids
	// are replayed, the others are skipped, each with its reason, so a
	// repeated request is a 200 that replays nothing twice.
	t.Run("a non-FAILED id is skipped with the reason; the FAILED one is replayed", func(t *testing.T) {
		failed := b.deadLetter("orders", "c")[0]
		pending := b.insert("orders", "d")[0]
		body := jsonBody(t, wire.DLQSelector{IDs: []int64{failed, pending}})
		got := decode[wire.Replayed](t, wantStatus(t, b.do("POST", "/v1/dlq/replay", body), 200))
		if got.Replayed != 1 || !slices.Equal(got.IDs, []int64{failed}) || len(got.Skipped) != 1 ||
			got.Skipped[0].ID != pending || !strings.Contains(got.Skipped[0].Reason, "PENDING") {
			t.Errorf("replay = %+v, want %d replayed and %d skipped as PENDING", got, failed, pending)
		}
		if s := b.status(failed); s != outbox.StatusQueued {
			t.Errorf("the FAILED id became %s, want QUEUED", s)
		}
		again := decode[wire.Replayed](t, wantStatus(t, b.do("POST", "/v1/dlq/replay", body), 200))
		if again.Replayed != 0 || len(again.Skipped) != 2 {
			t.Errorf("repeat = %+v, want nothing replayed, both skipped", again)
		}
	})

	t.Run("an unknown id is skipped as not existing", func(t *testing.T) {
		got := decode[wire.Replayed](t, wantStatus(t, b.do("POST", "/v1/dlq/replay", `{"ids":[987654321]}`), 200))
		if got.Replayed != 0 || len(got.Skipped) != 1 || got.Skipped[0].Reason != "does not exist" || got.IDs == nil {
			t.Errorf("replay = %+v", got)
		}
	})

	t.Run("a whole channel", func(t *testing.T) {
		ids := b.deadLetter("alerts", "f", "g", "h")
		got := decode[wire.Replayed](t, wantStatus(t, b.do("POST", "/v1/dlq/replay", `{"channel":"alerts"}`), 200))
		if got.Replayed != 3 || !slices.Equal(got.IDs, ids) {
			t.Errorf("answer %+v, want %v", got, ids)
		}
		st, err := b.engine.Stats(b.ctx, "alerts")
		must(t, err)
		if st.Dead != 0 || st.Ready != 3 {
			t.Errorf("alerts queue %+v, want 3 ready and 0 dead", st)
		}
		again := decode[wire.Replayed](t, wantStatus(t, b.do("POST", "/v1/dlq/replay", `{"channel":"alerts"}`), 200))
		if again.Replayed != 0 {
			t.Errorf("second replay of the channel moved %d, want 0", again.Replayed)
		}
	})

	t.Run("a whole channel past the replay chunk, twice over", func(t *testing.T) {
		recipients := make([]string, 2500) // past the 1,000-row chunk twice
		for i := range recipients {
			recipients[i] = fmt.Sprintf("bulk-%d", i)
		}
		b.deadLetter("alerts", recipients...)
		got := decode[wire.Replayed](t, wantStatus(t, b.do("POST", "/v1/dlq/replay", `{"channel":"alerts"}`), 200))
		st, err := b.engine.Stats(b.ctx, "alerts")
		must(t, err)
		if got.Replayed != 2500 || st.Dead != 0 || st.Ready != 2500+3 {
			t.Errorf("replayed %d; alerts queue %+v; want 2500 replayed and ready (beside the 3 before)", got.Replayed, st)
		}
	})

	t.Run("a channel this instance does not run is refused, as on the dashboard", func(t *testing.T) {
		wantError(t, b.do("POST", "/v1/dlq/replay", `{"channel":"elsewhere"}`), 422, wire.CodeInvalid, "not configured")
	})

	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		mention    []string
	}{
		{"neither", `{}`, 422, wire.CodeInvalid, []string{"ids", "channel"}},
		{"both", `{"ids":[1],"channel":"orders"}`, 422, wire.CodeInvalid, []string{"either"}},
		{"empty ids", `{"ids":[]}`, 422, wire.CodeInvalid, []string{"ids"}},
		{"zero id", `{"ids":[5,0]}`, 422, wire.CodeInvalid, []string{"ids[1]"}},
		{"ids not numbers", `{"ids":["a"]}`, 400, wire.CodeBadRequest, []string{"ids"}},
		{"unknown field", `{"id":[1]}`, 400, wire.CodeBadRequest, []string{`"id"`}},
		{"not JSON", `ids=1`, 400, wire.CodeBadRequest, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, b.do("POST", "/v1/dlq/replay", tc.body), tc.status, tc.code, tc.mention...)
		})
	}
}

func TestServer_DLQPurge(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})

	t.Run("by ids: rows and history gone, off the dead list", func(t *testing.T) {
		ids := b.deadLetter("orders", "a", "b", "c")
		got, err := b.c.PurgeDLQ(b.ctx, wire.DLQSelector{IDs: ids[:2]})
		if err != nil || got.Purged != 2 {
			t.Fatalf("PurgeDLQ = %+v, %v; want 2 purged", got, err)
		}
		for _, id := range ids[:2] {
			if _, err := b.store.Get(b.ctx, id); err == nil {
				t.Errorf("id %d still exists after purge", id)
			}
		}
		if s := b.status(ids[2]); s != outbox.StatusFailed {
			t.Errorf("unpurged id is %s, want FAILED", s)
		}
		st, err := b.engine.Stats(b.ctx, "orders")
		must(t, err)
		if st.Dead != 1 {
			t.Errorf("dead list holds %d, want 1", st.Dead)
		}
	})

	t.Run("a non-FAILED id is skipped and never purged", func(t *testing.T) {
		failed := b.deadLetter("orders", "d")[0]
		pending := b.insert("orders", "e")[0]
		got := decode[wire.Purged](t, wantStatus(t, b.do("POST", "/v1/dlq/purge", jsonBody(t, wire.DLQSelector{IDs: []int64{failed, pending}})), 200))
		if got.Purged != 1 || len(got.Skipped) != 1 || got.Skipped[0].ID != pending || !strings.Contains(got.Skipped[0].Reason, "PENDING") {
			t.Errorf("purge = %+v", got)
		}
		if s := b.status(pending); s != outbox.StatusPending {
			t.Errorf("the PENDING id is %s after a purge", s)
		}
	})

	t.Run("ids on another channel than the one named are skipped", func(t *testing.T) {
		failed := b.deadLetter("alerts", "f")[0]
		got := decode[wire.Purged](t, wantStatus(t, b.do("POST", "/v1/dlq/purge", jsonBody(t, wire.DLQSelector{IDs: []int64{failed}, Channel: "orders"})), 200))
		if got.Purged != 0 || len(got.Skipped) != 1 || !strings.Contains(got.Skipped[0].Reason, `"alerts"`) {
			t.Errorf("purge = %+v", got)
		}
		if s := b.status(failed); s != outbox.StatusFailed {
			t.Errorf("the other channel's row is %s", s)
		}
	})

	t.Run("an unknown id is skipped", func(t *testing.T) {
		got := decode[wire.Purged](t, wantStatus(t, b.do("POST", "/v1/dlq/purge", `{"ids":[987654321]}`), 200))
		if got.Purged != 0 || len(got.Skipped) != 1 || got.Skipped[0].Reason != "does not exist" {
			t.Errorf("purge = %+v", got)
		}
	})

	t.Run("a whole channel; others untouched", func(t *testing.T) {
		b.deadLetter("alerts", "g")
		otherFailed := b.deadLetter("orders", "h")[0]
		got := decode[wire.Purged](t, wantStatus(t, b.do("POST", "/v1/dlq/purge", `{"channel":"alerts"}`), 200))
		if got.Purged != 2 { // f from the subtest above, and g
			t.Errorf("purged %d, want 2", got.Purged)
		}
		if s := b.status(otherFailed); s != outbox.StatusFailed {
			t.Errorf("orders' FAILED row is %s after purging alerts", s)
		}
		st, err := b.engine.Stats(b.ctx, "alerts")
		must(t, err)
		if st.Dead != 0 {
			t.Errorf("alerts dead list holds %d, want 0", st.Dead)
		}
	})

	t.Run("neither ids nor channel is 422", func(t *testing.T) {
		wantError(t, b.do("POST", "/v1/dlq/purge", `{}`), 422, wire.CodeInvalid, "ids", "channel")
	})
}

// A dead-letter page stops 16 MiB past its first row as the rows read back
// (outbox.MaxPageBytes), and sdk/client reads an answer within 64 MiB
// (client.MaxAnswerBytes) to leave room for JSON's escapes. The answer
// escaped every <, > and & as \u003c (six bytes for one), so 65 dead
// letters of `<>` within http.max_payload_bytes (the default 256 KiB) made
// a 96 MiB page that `notifyd dlq list` and every client refused: those
// dead letters could not be listed at all. An answer is JSON for a program,
// never HTML: it escapes only what JSON must.
func TestServer_DLQList_markupWithinClientBound(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	markup := json.RawMessage(`{"html":"` + strings.Repeat("<>", (256<<10-20)/2) + `"}`)
	ns := rows("orders", slices.Repeat([]string{"r"}, 70)...)
	for i := range ns {
		ns[i].Payload = markup
	}
	want := b.deadLetterRows("orders", ns)
	var got []int64
	for after, pages := int64(0), 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("%d pages and still not at the end", pages)
		}
		page, err := b.c.DLQ(b.ctx, client.DLQQuery{Channel: "orders", After: after, Limit: 1000})
		if err != nil {
			t.Fatalf("page after %d: %v", after, err)
		}
		for _, n := range page.Notifications {
			got = append(got, n.ID)
		}
		if page.NextAfter == 0 {
			break
		}
		after = page.NextAfter
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %d dead letters, want all %d", len(got), len(want))
	}
}
