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
// notifications) and those that read one notification whole (its page,
// and the look-ups by id and by key, which read the row, its attempt log
// and receipt — ~9 MiB at their largest — to know it exists) hold their
// share of the bound on answers in flight that the API's handler carries
// for the dashboard, as the API's own reads do: while the bound is full
// they are a 503 page with Retry-After naming it, and a page that reads
// no row is served meanwhile. Before, the dashboard read its pages outside
// any bound, and then its one-row reads: a few hundred views of a 9 MiB
// notification at once held GBs.
func TestUI_PagesHoldAnswersInFlight(t *testing.T) {
	t.Parallel()
	answers := httpguard.NewAnswers(64<<20, 200*time.Millisecond)
	b := setup(t, withAnswers(answers))
	c, _ := b.loggedIn()
	id := b.forceFailed(testChannel, 1)[0]
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET idempotency_key = 'key-1' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	sid := strconv.FormatInt(id, 10)
	reading := []string{
		"/ui/dead", "/ui/jobs", "/ui/lookup?by=recipient&q=bulk-1@example.com",
		"/ui/n/" + sid, "/ui/lookup?q=" + sid, "/ui/lookup?by=key&q=key-1",
	}

	release, err := answers.Hold(context.Background(), 64<<20) // the whole bound, as answers in flight would
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range reading {
		res := c.get(path)
		if res.status != http.StatusServiceUnavailable || res.header.Get("Retry-After") == "" || !strings.Contains(res.body, "answers in flight") {
			t.Errorf("GET %s while the bound on answers in flight is full: %d (Retry-After %q); want 503 with Retry-After naming the bound; body:\n%.2000s",
				path, res.status, res.header.Get("Retry-After"), res.body)
		}
	}
	for _, path := range []string{"/ui/", "/ui/lookup"} {
		if res := c.get(path); res.status != http.StatusOK {
			t.Errorf("GET %s while the bound on answers in flight is full: %d, want 200", path, res.status)
		}
	}
	release()
	for _, path := range reading {
		if res := c.get(path); res.status != http.StatusOK && res.status != http.StatusSeeOther {
			t.Errorf("GET %s once the bound is free: %d, want 200 (or the look-up's 303)", path, res.status)
		}
	}
	// Every request gave back all it held.
	release, err = answers.Hold(context.Background(), 64<<20)
	if err != nil {
		t.Fatalf("the whole bound once the pages were answered: %v", err)
	}
	release()
}
