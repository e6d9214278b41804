package hostile

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// headerCapture is a receiver that keeps the headers of what it is sent.
type headerCapture struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newHeaderCapture(t *testing.T) *headerCapture {
	c := &headerCapture{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.seen = append(c.seen, r.Header.Clone())
		c.mu.Unlock()
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *headerCapture) headers() []http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]http.Header(nil), c.seen...)
}

// recipientURLChannel is a channel whose recipients may be URLs, with a
// configured URL that holds credentials and static secret headers.
func recipientURLChannel(configured *headerCapture) func(*daemon) string {
	return func(*daemon) string {
		u := strings.Replace(configured.URL, "http://", "http://svc:url-password@", 1) + "/in?token=url-query-secret"
		return fmt.Sprintf(`
  byurl:
    plugin: webhook
    config:
      url: %q
      allow_recipient_url: true
      secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
      headers: {Authorization: "Bearer header-secret", X-Api-Key: key-secret}
`, u)
	}
}

// recipientURL is issue 26's sixth finding, black-box: a recipient-chosen
// URL once received the channel's Authorization and X-Api-Key. It gets the
// body and the signature only; the configured URL still gets its headers.
func recipientURL(t *testing.T, d *daemon, configured *headerCapture) {
	chosen := newHeaderCapture(t)
	ns := []string{chosen.URL + "/anything", "not-a-url"}
	var sent []int64
	for _, r := range ns {
		status, body := d.raw(t, "POST", "/v1/notifications", mustJSON(map[string]any{
			"channel": "byurl", "recipient": r, "payload": map[string]string{"text": "hi"}}))
		if status != 202 {
			t.Fatalf("POST to %s: %d %.300s", r, status, body)
		}
		sent = append(sent, ids(body)...)
	}
	for id, n := range d.waitFinal(t, sent, 60*time.Second) {
		if n.Status != "SENT" {
			t.Errorf("notification %d to %s: %s (%q), want SENT", id, n.Recipient, n.Status, n.LastError)
		}
	}
	secrets := []string{"header-secret", "key-secret", "url-password", "url-query-secret"}
	for _, h := range chosen.headers() {
		all := fmt.Sprint(h)
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Errorf("the recipient's own URL received %q: %v", s, h)
			}
		}
		if h.Get("Webhook-Signature") == "" {
			t.Errorf("the recipient's own URL got no webhook-signature: %v", h)
		}
	}
	if len(chosen.headers()) != 1 {
		t.Errorf("the recipient's URL got %d requests, want 1", len(chosen.headers()))
	}
	got := configured.headers()
	if len(got) != 1 || got[0].Get("Authorization") != "Bearer header-secret" || got[0].Get("X-Api-Key") != "key-secret" {
		t.Errorf("the configured URL got %v; want one request with the configured headers", got)
	}
}
