package ui_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/httpguard"
)

// The pages that read a page of rows (dead letters, jobs, a recipient's
// notifications: each up to 16 MiB past its first row) hold their share of
// the bound on answers in flight that the API's handler carries for the
// dashboard, as the API's own pages do: while the bound is full they are a
// 503 page with Retry-After naming it, and a page that reads one
// notification, or none, is served meanwhile. Before, the dashboard read
// its pages outside any bound.
func TestUI_PagesHoldAnswersInFlight(t *testing.T) {
	t.Parallel()
	answers := httpguard.NewAnswers(64<<20, 200*time.Millisecond)
	b := setup(t, withAnswers(answers))
	c, _ := b.loggedIn()
	id := b.forceFailed(testChannel, 1)[0]

	release, err := answers.Hold(context.Background(), 64<<20) // the whole bound, as pages in flight would
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/ui/dead", "/ui/jobs", "/ui/lookup?by=recipient&q=bulk-1@example.com"} {
		res := c.get(path)
		if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "" || !strings.Contains(res.body, "answers in flight") {
			t.Errorf("GET %s while the bound on answers in flight is full: %d (Retry-After %q); want 503 with Retry-After naming the bound; body:\n%.2000s",
				path, res.status, res.header.Get("Retry-After"), res.body)
		}
	}
	for _, path := range []string{"/ui/n/" + strconv.FormatInt(id, 10), "/ui/"} {
		if res := c.get(path); res.status != http.StatusOK {
			t.Errorf("GET %s while the bound on answers in flight is full: %d, want 200", path, res.status)
		}
	}
	release()
	for _, path := range []string{"/ui/dead", "/ui/jobs", "/ui/lookup?by=recipient&q=bulk-1@example.com"} {
		if res := c.get(path); res.status != http.StatusOK {
			t.Errorf("GET %s once the bound is free: %d, want 200", path, res.status)
		}
	}
}
