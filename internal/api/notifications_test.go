package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/client"
)

func TestServer_Enqueue(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{edit: func(c *config.Config) {
		c.HTTP.MaxBodyBytes = 8 << 10
		c.HTTP.MaxPayloadBytes = 1 << 10
	}})

	t.Run("one notification is 202 with its id, PENDING in the outbox", func(t *testing.T) {
		a := wantStatus(t, b.do("POST", "/v1/notifications", `{"channel":"orders","recipient":"user-1","payload":{"text":"hi"}}`), 202)
		got := decode[client.Enqueued](t, a)
		if got.ID <= 0 || got.Status != client.StatusPending || got.Duplicate {
			t.Fatalf("answer %+v, want a new id, PENDING, not duplicate", got)
		}
		n, err := b.store.Get(b.ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n.Channel != "orders" || n.Recipient != "user-1" || string(n.Payload) != `{"text": "hi"}` {
			t.Errorf("stored %s/%s %s, want orders/user-1 {\"text\": \"hi\"}", n.Channel, n.Recipient, n.Payload)
		}
	})

	t.Run("a repeated idempotency key is 200 with the original id", func(t *testing.T) {
		body := `{"channel":"orders","recipient":"user-2","payload":{},"idempotency_key":"order-42"}`
		first := decode[client.Enqueued](t, wantStatus(t, b.do("POST", "/v1/notifications", body), 202))
		again := decode[client.Enqueued](t, wantStatus(t, b.do("POST", "/v1/notifications", body), 200))
		if again.ID != first.ID || !again.Duplicate {
			t.Errorf("repeat answered %+v, want id %d with duplicate", again, first.ID)
		}
	})

	t.Run("send_at sets when it is due", func(t *testing.T) {
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		body := fmt.Sprintf(`{"channel":"alerts","recipient":"r","payload":1,"send_at":%q}`, at.Format(time.RFC3339))
		got := decode[client.Enqueued](t, wantStatus(t, b.do("POST", "/v1/notifications", body), 202))
		n, err := b.store.Get(b.ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !n.DueAt.Equal(at) {
			t.Errorf("due_at %s, want %s", n.DueAt, at)
		}
	})

	t.Run("a batch is 202 with one answer per notification, in order", func(t *testing.T) {
		body := `{"notifications":[
			{"channel":"orders","recipient":"a","payload":{}},
			{"channel":"alerts","recipient":"b","payload":{},"idempotency_key":"order-42"},
			{"channel":"orders","recipient":"c","payload":{},"idempotency_key":"batch-k"},
			{"channel":"orders","recipient":"d","payload":{},"idempotency_key":"batch-k"}]}`
		got := decode[client.EnqueuedBatch](t, wantStatus(t, b.do("POST", "/v1/notifications", body), 202))
		if len(got.Notifications) != 4 {
			t.Fatalf("%d answers, want 4: %+v", len(got.Notifications), got)
		}
		n := got.Notifications
		if n[0].Duplicate || !n[1].Duplicate || n[2].Duplicate || !n[3].Duplicate || n[3].ID != n[2].ID {
			t.Errorf("answers %+v: want new, duplicate (of order-42), new, duplicate of the third", n)
		}
		for i, r := range []string{"a", "c"} {
			id := n[i*2].ID
			got, err := b.store.Get(b.ctx, id)
			if err != nil || got.Recipient != r {
				t.Errorf("id %d: recipient %v (%v), want %s", id, got, err, r)
			}
		}
	})

	t.Run("a batch of repeats only is 200", func(t *testing.T) {
		body := `{"notifications":[{"channel":"orders","recipient":"c","payload":{},"idempotency_key":"batch-k"}]}`
		got := decode[client.EnqueuedBatch](t, wantStatus(t, b.do("POST", "/v1/notifications", body), 200))
		if !got.Notifications[0].Duplicate {
			t.Errorf("answer %+v, want duplicate", got)
		}
	})

	t.Run("through the Go client", func(t *testing.T) {
		res, err := b.c.EnqueueBatch(b.ctx, []client.Notification{
			{Channel: "orders", Recipient: "x", Payload: []byte(`{"a":1}`)},
			{Channel: "orders", Recipient: "y", Payload: []byte(`[1,2]`), SendAt: time.Now().Add(time.Minute)},
		})
		if err != nil || len(res) != 2 || res[0].ID == res[1].ID {
			t.Fatalf("EnqueueBatch = %+v, %v", res, err)
		}
		one, err := b.c.Enqueue(b.ctx, client.Notification{Channel: "nope", Recipient: "x", Payload: []byte(`{}`)})
		if client.StatusCode(err) != 422 {
			t.Errorf("Enqueue on an unknown channel = %+v, %v; want a 422 *client.Error", one, err)
		}
	})

	big := `"` + strings.Repeat("x", 1100) + `"`
	huge := `{"channel":"orders","recipient":"r","payload":"` + strings.Repeat("y", 9000) + `"}`
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		mention    []string
	}{
		{"empty body", ``, 400, client.CodeBadRequest, []string{"empty"}},
		{"not JSON", `{"channel":`, 400, client.CodeBadRequest, []string{"JSON"}},
		{"syntax error", `{"channel" "orders"}`, 400, client.CodeBadRequest, []string{"not valid JSON"}},
		{"an array at the top", `[{"channel":"orders"}]`, 400, client.CodeBadRequest, []string{"array", "object"}},
		{"trailing data", `{"channel":"orders","recipient":"r","payload":{}} {}`, 400, client.CodeBadRequest, []string{"after"}},
		{"unknown field", `{"channel":"orders","recipent":"r","payload":{}}`, 400, client.CodeBadRequest, []string{`"recipent"`}},
		{"wrong type", `{"channel":"orders","recipient":7,"payload":{}}`, 400, client.CodeBadRequest, []string{"recipient", "string"}},
		{"wrong type in a batch", `{"notifications":[{"channel":["x"]}]}`, 400, client.CodeBadRequest, []string{"channel"}},
		{"one and a batch", `{"channel":"orders","notifications":[]}`, 400, client.CodeBadRequest, []string{"either"}},
		{"body over http.max_body_bytes", huge, 413, client.CodeBodyTooLarge, []string{"http.max_body_bytes"}},
		{"missing channel", `{"recipient":"r","payload":{}}`, 422, client.CodeInvalid, []string{"channel", "required"}},
		{"unknown channel", `{"channel":"sms","recipient":"r","payload":{}}`, 422, client.CodeInvalid, []string{"channel", `"sms"`, "not a configured"}},
		{"missing recipient", `{"channel":"orders","payload":{}}`, 422, client.CodeInvalid, []string{"recipient"}},
		{"missing payload", `{"channel":"orders","recipient":"r"}`, 422, client.CodeInvalid, []string{"payload"}},
		{"null payload", `{"channel":"orders","recipient":"r","payload":null}`, 422, client.CodeInvalid, []string{"payload"}},
		{"payload over http.max_payload_bytes", `{"channel":"orders","recipient":"r","payload":` + big + `}`, 422, client.CodeInvalid, []string{"payload", "http.max_payload_bytes"}},
		{"bad send_at", `{"channel":"orders","recipient":"r","payload":{},"send_at":"tomorrow"}`, 422, client.CodeInvalid, []string{"send_at", "RFC 3339"}},
		{"NUL in the recipient", `{"channel":"orders","recipient":"a\u0000b","payload":{}}`, 422, client.CodeInvalid, []string{"recipient", "NUL"}},
		{"\\u0000 in the payload", `{"channel":"orders","recipient":"r","payload":{"t":"\u0000"}}`, 422, client.CodeInvalid, []string{"payload", `\u0000`}},
		{"idempotency key too long", `{"channel":"orders","recipient":"r","payload":{},"idempotency_key":"` + strings.Repeat("k", 600) + `"}`, 422, client.CodeInvalid, []string{"idempotency_key"}},
		{"empty batch", `{"notifications":[]}`, 422, client.CodeInvalid, []string{"notifications", "empty"}},
		{"bad item in a batch names its index", `{"notifications":[{"channel":"orders","recipient":"r","payload":{}},{"channel":"sms","recipient":"r","payload":{}}]}`, 422, client.CodeInvalid, []string{"notifications[1].channel"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, b.do("POST", "/v1/notifications", tc.body), tc.status, tc.code, tc.mention...)
		})
	}
}

// TestServer_EnqueueBatchLimit checks the 1,000-notification cap on its
// own, with a body limit big enough to carry 1,001.
func TestServer_EnqueueBatchLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	item := `{"channel":"orders","recipient":"r","payload":{}}`
	body := func(n int) string {
		return `{"notifications":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`
	}
	wantError(t, b.do("POST", "/v1/notifications", body(1001)), 422, client.CodeInvalid, "notifications", "1001", "1000")
	got := decode[client.EnqueuedBatch](t, wantStatus(t, b.do("POST", "/v1/notifications", body(1000)), 202))
	if len(got.Notifications) != 1000 {
		t.Errorf("%d answers, want 1000", len(got.Notifications))
	}
}

func TestServer_GetNotification(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	failed := b.deadLetter("orders", "user-9")[0]

	t.Run("200 with status, attempts, last_error and history", func(t *testing.T) {
		got := decode[client.NotificationInfo](t, wantStatus(t, b.do("GET", fmt.Sprintf("/v1/notifications/%d", failed), ""), 200))
		if got.ID != failed || got.Status != client.StatusFailed || got.Attempts != 1 || got.LastError == "" || got.Recipient != "user-9" {
			t.Errorf("got %+v, want FAILED after 1 attempt with its last error", got)
		}
		if len(got.History) != 1 || got.History[0].Outcome != outbox.OutcomePermanent || got.History[0].Attempt != 1 {
			t.Errorf("history %+v, want one PERMANENT attempt", got.History)
		}
		if got.CreatedAt.IsZero() || got.DueAt.IsZero() || got.UpdatedAt.IsZero() {
			t.Errorf("timestamps missing: %+v", got)
		}
	})
	t.Run("through the Go client", func(t *testing.T) {
		got, err := b.c.Notification(b.ctx, failed)
		if err != nil || got.Status != client.StatusFailed {
			t.Errorf("Notification = %+v, %v", got, err)
		}
	})
	t.Run("404 for an unknown id", func(t *testing.T) {
		wantError(t, b.do("GET", "/v1/notifications/987654321", ""), 404, client.CodeNotFound, "987654321")
	})
	t.Run("400 for an id that is not a number", func(t *testing.T) {
		wantError(t, b.do("GET", "/v1/notifications/abc", ""), 400, client.CodeBadRequest, `"abc"`)
		wantError(t, b.do("GET", "/v1/notifications/-3", ""), 400, client.CodeBadRequest, `"-3"`)
	})
}

func TestServer_Cancel(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	ids := b.insert("orders", "a", "b")
	failed := b.deadLetter("orders", "c")[0]

	t.Run("PENDING becomes CANCELLED", func(t *testing.T) {
		got := decode[client.Cancelled](t, wantStatus(t, b.do("POST", fmt.Sprintf("/v1/notifications/%d/cancel", ids[0]), ""), 200))
		if got.ID != ids[0] || got.Status != client.StatusCancelled {
			t.Errorf("answer %+v", got)
		}
		if s := b.status(ids[0]); s != outbox.StatusCancelled {
			t.Errorf("status %s, want CANCELLED", s)
		}
	})
	t.Run("cancelling again succeeds", func(t *testing.T) {
		wantStatus(t, b.do("POST", fmt.Sprintf("/v1/notifications/%d/cancel", ids[0]), ""), 200)
	})
	t.Run("through the Go client", func(t *testing.T) {
		if got, err := b.c.Cancel(b.ctx, ids[1]); err != nil || got.Status != client.StatusCancelled {
			t.Errorf("Cancel = %+v, %v", got, err)
		}
	})
	t.Run("a FAILED notification is 409 and stays FAILED", func(t *testing.T) {
		wantError(t, b.do("POST", fmt.Sprintf("/v1/notifications/%d/cancel", failed), ""), 409, client.CodeConflict, "FAILED")
		if s := b.status(failed); s != outbox.StatusFailed {
			t.Errorf("status %s, want FAILED", s)
		}
	})
	t.Run("a SENT notification is 409", func(t *testing.T) {
		sent := b.insert("orders", "d")[0]
		if _, err := b.store.Relay(b.ctx, time.Now().Add(time.Minute), 100); err != nil {
			t.Fatal(err)
		}
		cl, err := b.store.Claim(b.ctx, []int64{sent}, time.Now().Add(time.Minute), time.Minute)
		must(t, err)
		_, err = b.store.Settle(b.ctx, []outbox.Settlement{{ID: sent, Attempt: cl[0].Attempt, Result: outbox.ResultSent}})
		must(t, err)
		wantError(t, b.do("POST", fmt.Sprintf("/v1/notifications/%d/cancel", sent), ""), 409, client.CodeConflict, "SENT")
	})
	t.Run("404 for an unknown id", func(t *testing.T) {
		wantError(t, b.do("POST", "/v1/notifications/987654321/cancel", ""), 404, client.CodeNotFound, "987654321")
	})
	t.Run("400 for a bad id", func(t *testing.T) {
		wantError(t, b.do("POST", "/v1/notifications/x1/cancel", ""), 400, client.CodeBadRequest, `"x1"`)
	})
}

func TestServer_UnknownRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	wantError(t, b.do("GET", "/v1/nope", ""), 404, client.CodeNotFound, "/v1/nope")
	a := b.do("DELETE", "/v1/notifications", "")
	wantError(t, a, http.StatusMethodNotAllowed, client.CodeMethodNotAllowed, "DELETE")
	if allow := a.header.Get("Allow"); !strings.Contains(allow, "POST") {
		t.Errorf("Allow header %q, want POST in it", allow)
	}
}
