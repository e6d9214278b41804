package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/sdk/wire"
)

const callbackSecret = "cb-secret-0123456789abcdef"

// partner is a fake provider: it takes the webhook plugin's deliveries and,
// for every recipient but "quiet", calls notifyd back with a delivery
// report, as a provider's message-result webhook does. A report that
// arrives before notifyd committed SENT is answered 503, and the partner
// calls again, as real ones do.
type partner struct {
	srv      *httptest.Server
	callback string // notifyd's callback URL, set once the API is up
	mu       sync.Mutex
	answers  []int // the final status of each report
}

func newPartner(t *testing.T) *partner {
	p := &partner{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			ID        int64  `json:"id"`
			Recipient string `json:"recipient"`
		}
		_ = json.NewDecoder(r.Body).Decode(&env)
		w.WriteHeader(http.StatusOK)
		if env.Recipient == "quiet" {
			return
		}
		status := "delivered"
		if env.Recipient == "unreachable" {
			status = "failed"
		}
		// The report goes by webhook-id, as a receiver that kept only the
		// header would send it.
		body := fmt.Sprintf(`{"id":%q,"status":%q,"detail":"handset said so","code":"R-1","at":"2025-03-01T10:00:00Z"}`,
			r.Header.Get("Webhook-Id"), status)
		go p.report(body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *partner) report(body string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := postCallback(p.callback, callbackSecret, body)
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			p.mu.Lock()
			p.answers = append(p.answers, code)
			p.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postCallback POSTs body to url with the secret; it answers the status and
// body.
func postCallback(url, secret, body string) (int, []byte) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	if secret != "" {
		req.Header.Set(config.DefaultCallbackHeader, secret)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, b
}

// waitReceipt polls the API until notification id has a receipt and its
// send is settled: the partner may report before notifyd has committed what
// the plugin answered (a receipt for a PROCESSING row is kept, and the row
// goes on to SENT), so the two are waited for together.
func waitReceipt(t *testing.T, b *bundle, id int64) *wire.NotificationInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := b.c.Notification(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		settled := n.Status != wire.StatusPending && n.Status != wire.StatusQueued && n.Status != wire.StatusProcessing
		if n.Receipt != nil && settled {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("notification %d (%s, receipt %v) has no receipt or is not settled after 30s", id, n.Status, n.Receipt != nil)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServer_Callback drives the whole receipt path: the real webhook plugin
// delivers to a fake partner, the partner calls the channel's callback route
// of a real API server with the channel's secret, and the receipt shows in
// GET /v1/notifications/{id}; then every refusal the route makes.
func TestServer_Callback(t *testing.T) {
	t.Parallel()
	p := newPartner(t)
	b := setup(t, setupOptions{sinkURL: p.srv.URL + "/hook", startEngine: true, edit: func(c *config.Config) {
		ch := c.Channels["orders"]
		ch.Callback = config.Callback{Secret: callbackSecret, MaxBodyBytes: 1024}
		c.Channels["orders"] = ch
	}})
	url := b.url + "/v1/channels/orders/callback"
	p.callback = url

	enqueue := func(recipient string) int64 {
		t.Helper()
		e, err := b.c.Enqueue(b.ctx, wire.Notification{Channel: "orders", Recipient: recipient, Payload: json.RawMessage(`{"text":"hi"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	receipts := func() int {
		t.Helper()
		var n int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM notification_receipts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	delivered := enqueue("user-1")
	n := waitReceipt(t, b, delivered)
	r := n.Receipt
	if n.Status != wire.StatusSent || r.Outcome != wire.ReceiptDelivered || r.Detail != "handset said so" || r.ProviderCode != "R-1" ||
		!r.ReportedAt.Equal(time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)) || r.Attempt != 1 || r.ReceivedAt.IsZero() {
		t.Errorf("notification %d: status %s, receipt %+v; want SENT with the partner's DELIVERED report", delivered, n.Status, r)
	}
	if len(n.History) != 1 || n.History[0].Outcome != "SUCCESS" {
		t.Errorf("history %+v: want the one SUCCESS attempt, the receipt beside it", n.History)
	}

	t.Run("failed after sending stays SENT, out of the dead letters", func(t *testing.T) {
		id := enqueue("unreachable")
		n := waitReceipt(t, b, id)
		if n.Status != wire.StatusSent || n.Receipt.Outcome != wire.ReceiptFailedAfterSend {
			t.Errorf("status %s receipt %+v; want SENT with FAILED_AFTER_SEND", n.Status, n.Receipt)
		}
		page, err := b.c.DLQ(b.ctx, wire.DLQQuery{Channel: "orders"})
		if err != nil || len(page.Notifications) != 0 {
			t.Errorf("DLQ = %+v, %v; want empty", page, err)
		}
	})

	quiet := enqueue("quiet")
	waitStatus(t, b, quiet, wire.StatusSent)
	report := fmt.Sprintf(`{"id":%d,"status":"delivered"}`, quiet)

	t.Run("a wrong secret is 401 and records nothing", func(t *testing.T) {
		before := receipts()
		for _, secret := range []string{"", "cb-secret-0123456789abcdeX", callbackSecret[:10]} {
			code, body := postCallback(url, secret, report)
			if code != http.StatusUnauthorized || !strings.Contains(string(body), config.DefaultCallbackHeader) {
				t.Errorf("secret %q: %d %s; want 401 naming the header", secret, code, body)
			}
			if strings.Contains(string(body), callbackSecret) {
				t.Errorf("the answer shows the secret: %s", body)
			}
		}
		if got := receipts(); got != before {
			t.Errorf("%d receipts after bad secrets, want %d", got, before)
		}
		if n, _ := b.c.Notification(b.ctx, quiet); n.Receipt != nil {
			t.Errorf("quiet has receipt %+v after bad secrets", n.Receipt)
		}
	})

	t.Run("the same callback twice is applied once", func(t *testing.T) {
		code, body := postCallback(url, callbackSecret, report)
		var res wire.CallbackResult
		if err := json.Unmarshal(body, &res); code != http.StatusOK || err != nil || res.Applied != 1 || res.Ignored != 0 {
			t.Fatalf("first: %d %s; want 200 with one applied", code, body)
		}
		first := waitReceipt(t, b, quiet).Receipt
		code, body = postCallback(url, callbackSecret, strings.Replace(report, "delivered", "failed", 1))
		res = wire.CallbackResult{}
		if err := json.Unmarshal(body, &res); code != http.StatusOK || err != nil || res.Applied != 0 || res.Ignored != 1 ||
			res.Updates[0].Reason != wire.ReceiptIgnoredDuplicate {
			t.Fatalf("second: %d %s; want 200 with one ignored as duplicate", code, body)
		}
		again, _ := b.c.Notification(b.ctx, quiet)
		if *again.Receipt != *first {
			t.Errorf("receipt changed by the second callback: %+v, was %+v", again.Receipt, first)
		}
	})

	t.Run("a body over the bound is 413", func(t *testing.T) {
		before := receipts()
		big := fmt.Sprintf(`{"id":%d,"status":"delivered","detail":"%s"}`, quiet, strings.Repeat("x", 2048))
		code, body := postCallback(url, callbackSecret, big)
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "max_body_bytes") {
			t.Errorf("%d %s; want 413 naming max_body_bytes", code, body)
		}
		if got := receipts(); got != before {
			t.Errorf("%d receipts, want %d", got, before)
		}
	})

	t.Run("unknown and other channel's ids are ignored with the reason", func(t *testing.T) {
		other, err := b.c.Enqueue(b.ctx, wire.Notification{Channel: "alerts", Recipient: "x", Payload: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`[{"id":%d,"status":"delivered"},{"id":"msg_%d","status":"failed"}]`, int64(1)<<40, other.ID)
		code, out := postCallback(url, callbackSecret, body)
		var res wire.CallbackResult
		if err := json.Unmarshal(out, &res); code != http.StatusOK || err != nil || res.Ignored != 2 || len(res.Updates) != 2 {
			t.Fatalf("%d %s; want 200 with two ignored", code, out)
		}
		for _, u := range res.Updates {
			if u.Reason != wire.ReceiptIgnoredUnknown || !strings.Contains(u.Message, "on channel orders") {
				t.Errorf("update %+v: want unknown, naming the channel", u)
			}
		}
	})

	t.Run("a report before SENT is 503, and applied when called again after", func(t *testing.T) {
		if err := b.c.PauseChannel(b.ctx, "orders", "receipt test"); err != nil {
			t.Fatal(err)
		}
		id := enqueue("quiet")
		waitStatus(t, b, id, wire.StatusQueued)
		early := fmt.Sprintf(`{"id":%d,"status":"delivered"}`, id)
		code, body := postCallback(url, callbackSecret, early)
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "not SENT yet") {
			t.Errorf("while QUEUED: %d %s; want 503 saying not SENT yet", code, body)
		}
		if n, _ := b.c.Notification(b.ctx, id); n.Receipt != nil {
			t.Errorf("receipt %+v recorded on a QUEUED notification", n.Receipt)
		}
		if err := b.c.ResumeChannel(b.ctx, "orders"); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, b, id, wire.StatusSent)
		if code, body := postCallback(url, callbackSecret, early); code != http.StatusOK || !strings.Contains(string(body), `"applied":1`) {
			t.Errorf("once SENT: %d %s; want 200 with one applied", code, body)
		}
	})

	t.Run("a body the plugin cannot read is 400 with its reason", func(t *testing.T) {
		code, body := postCallback(url, callbackSecret, `{"id":1,"status":"opened"}`)
		if code != http.StatusBadRequest || !strings.Contains(string(body), `opened`) {
			t.Errorf("%d %s; want 400 quoting the status", code, body)
		}
	})

	t.Run("a channel without a callback secret is 404", func(t *testing.T) {
		for _, ch := range []string{"alerts", "nosuch"} {
			code, body := postCallback(b.url+"/v1/channels/"+ch+"/callback", callbackSecret, report)
			if code != http.StatusNotFound || !strings.Contains(string(body), ch+" takes no callbacks") {
				t.Errorf("%s: %d %s; want 404 naming the channel", ch, code, body)
			}
		}
	})

	t.Run("the partner's own reports all ended 200", func(t *testing.T) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, code := range p.answers {
			if code != http.StatusOK {
				t.Errorf("a partner report ended %d (answers %v)", code, p.answers)
				break
			}
		}
		if len(p.answers) < 2 {
			t.Errorf("partner made %d reports, want at least 2", len(p.answers))
		}
	})
}
