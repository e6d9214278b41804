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

// bigNotification writes the largest notification a page reads, of the
// text HTML escapes most: a 1 MiB payload and a 4 MiB result of short
// strings of `"<>`, and 1,000 attempts of a 4 KiB error of `"`.
func (b *bundle) bigNotification() int64 {
	b.t.Helper()
	id := b.forceFailed(testChannel, 1)[0]
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET
	       payload = (SELECT jsonb_agg('"<>'::text) FROM generate_series(1, 100000)),
	       result = (SELECT jsonb_agg('"<>'::text) FROM generate_series(1, 400000)), last_error = repeat('"', 4096)
	 WHERE id = $1`, id); err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO notification_attempts
	    (notification_id, attempt, started_at, finished_at, outcome, provider_status, provider_code, error)
	  SELECT $1, g, now(), now(), 'TRANSIENT', 500, repeat('<', 256), repeat('"', 4096) FROM generate_series(1, 1000) g`, id); err != nil {
		b.t.Fatal(err)
	}
	return id
}

// A notification's page showed its payload, result and every attempt's
// error whole, HTML-escaped (`"` is `&#34;`) and indented: a row of ~9 MiB
// rendered a 34 MiB page, and one view grew the heap by ~200 MiB, outside
// the bound on answers in flight. The page now shows the first 256 KiB of
// a payload or result (saying where the whole is) and 512 characters of
// each attempt's error, and a page being rendered holds what it has grown
// to of the bound, on top of its rows' (httpguard.Grow) when that is free;
// it is never made to wait for it while it holds its rows (two pages would
// wait on each other), and all it held is given back once it is written.
func TestUI_NotificationPageBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.bigNotification()
	c, _ := b.loggedIn()
	res := c.get("/ui/n/" + strconv.FormatInt(id, 10))
	if res.status != http.StatusOK {
		t.Fatalf("the page of a 9 MiB notification: %d", res.status)
	}
	if len(res.body) > 8<<20 {
		t.Errorf("the page of a 9 MiB notification is %d MiB, want at most 8 MiB", len(res.body)>>20)
	}
	for _, want := range []string{`id="payload-cut"`, `id="result-cut"`, "GET /v1/notifications/" + strconv.FormatInt(id, 10)} {
		if !strings.Contains(res.body, want) {
			t.Errorf("the page of a cut payload and result does not say so: no %s", want)
		}
	}

	// While the bound has room for the row's read bound and not for the
	// page besides, the page is still rendered (its growth is not waited
	// for), and afterwards the bound is whole again but for the other
	// answer's 3 MiB.
	answers := httpguard.NewAnswers(httpguard.NotificationGetBytes+4<<20, 200*time.Millisecond)
	release, err := answers.Hold(context.Background(), 3<<20) // another answer in flight
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	small := setup(t, withAnswers(answers))
	id = small.bigNotification()
	c, _ = small.loggedIn()
	res = c.get("/ui/n/" + strconv.FormatInt(id, 10))
	if res.status != http.StatusOK {
		t.Errorf("the page of a 9 MiB notification, rendered with no room to grow: %d, want 200", res.status)
	}
	rest, err := answers.Hold(context.Background(), httpguard.NotificationGetBytes+1<<20)
	if err != nil {
		t.Fatalf("the bound after the page was written: %v; want all it held given back", err)
	}
	rest()
}
