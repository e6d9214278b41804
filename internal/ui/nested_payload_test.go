package ui_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A notification's page shows its payload indented. json.Indent puts every
// level of nesting on a line of its own, indented by its depth, so its
// output grows with the square of the nesting: a 6 KB payload of arrays
// 3,000 deep is 18 MB indented, and a 1 MiB payload of such chains (the API
// accepts 9,000 deep; an application's SQL may write more) would be about
// 9 GB, built in the daemon's memory for one page view (and again on each
// refresh). The page must stay within a bound of the payload's own size.
func TestUI_NotificationPageNestedPayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	chain := strings.Repeat("[", 3000) + strings.Repeat("]", 3000)
	payload := "[" + strings.Repeat(chain+",", 3) + chain + "]" // 24 KB
	var id int64
	if err := b.db.Pool.QueryRow(b.ctx, `
INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error)
VALUES ($1, 'nested@example.com', $2::jsonb, 'FAILED', 1, 'test: nested payload')
RETURNING id`, testChannel, payload).Scan(&id); err != nil {
		t.Fatal(err)
	}
	c, _ := b.loggedIn()
	res := c.get(fmt.Sprintf("/ui/n/%d", id))
	if res.status != http.StatusOK {
		t.Fatalf("status %d, want 200; body: %.500s", res.status, res.body)
	}
	if bound := 2*len(payload) + 1<<20; len(res.body) > bound {
		t.Fatalf("the page of a %d-byte payload is %d bytes, want at most %d: its indentation grows with the square of the nesting",
			len(payload), len(res.body), bound)
	}
	if !strings.Contains(res.body, "[[[[[[[[") {
		t.Errorf("the page does not show the payload")
	}
}
