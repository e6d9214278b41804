package ui_test

import (
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The dead-letter list and the look-up by recipient show a line of each
// row: its channel, recipient, attempts, times and the start of its error.
// They read whole rows to show it — payload and result, up to 5 MiB a row,
// so a page stopped at the row past 16 MiB (outbox.MaxPageBytes): eight
// dead letters of 5 MiB were shown four to a page, and each page held
// ~21 MiB. They now read the rows' summaries (outbox.Summary: no payload
// or result, the error cut in Postgres), so every row of the page is
// shown, and a page holds its row count times outbox.SummaryBytes.
func TestUI_ListsReadSummaries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, _ := b.loggedIn()
	ids := b.forceFailed(testChannel, 8)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET recipient = 'big@example.com',
	       payload = jsonb_build_object('p', repeat('x', $2)), result = jsonb_build_object('r', repeat('y', $3)),
	       last_error = repeat('e', 3000) || 'TAIL'
	 WHERE id = ANY($1)`, ids, 1<<20-64, 4<<20-64); err != nil {
		t.Fatal(err)
	}

	res := c.get("/ui/dead?channel=" + testChannel)
	if res.status != http.StatusOK {
		t.Fatalf("dead letters: %d\n%.2000s", res.status, res.body)
	}
	if got := deadIDs(t, res.body); len(got) != len(ids) {
		t.Errorf("the dead-letter page shows %d of the %d dead letters of 5 MiB: %v; want all of them on one page", len(got), len(ids), got)
	}
	if strings.Contains(res.body, "next-page") {
		t.Errorf("the dead-letter page of %d rows links a next page", len(ids))
	}
	if strings.Contains(res.body, "TAIL") || !strings.Contains(res.body, "eee…") {
		t.Errorf("the dead-letter page shows the end of a 3,004-byte error, or does not mark its cut")
	}

	res = c.get("/ui/lookup?by=recipient&q=big@example.com")
	if res.status != http.StatusOK {
		t.Fatalf("look-up by recipient: %d\n%.2000s", res.status, res.body)
	}
	if got := regexp.MustCompile(`<tr id="result-(\d+)"`).FindAllString(res.body, -1); len(got) != len(ids) {
		t.Errorf("the look-up by recipient shows %d of the %d notifications of 5 MiB; want all of them on one page", len(got), len(ids))
	}
	if strings.Contains(res.body, "TAIL") {
		t.Errorf("the look-up by recipient shows the end of a 3,004-byte error")
	}
}

// A look-up by id or by idempotency key only needs to know the
// notification exists, to go to its page: it read the whole row, attempt
// log and all (a 9 MiB notification allocated ~10 MiB a look-up: 194 MiB for 20). It now
// reads the row's summary. Not parallel: it counts the process's
// allocations.
func TestUI_LookupReadsSummary(t *testing.T) {
	b := setup(t)
	id := b.bigNotification()
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET idempotency_key = 'big-key' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	c, _ := b.loggedIn()
	want := "/ui/n/" + strconv.FormatInt(id, 10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const lookups = 10
	for range lookups {
		for _, q := range []string{"/ui/lookup?q=" + strconv.FormatInt(id, 10), "/ui/lookup?by=key&q=big-key"} {
			if res := c.get(q); res.status != http.StatusSeeOther || res.header.Get("Location") != want {
				t.Fatalf("GET %s: %d to %q, want 303 to %s", q, res.status, res.header.Get("Location"), want)
			}
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 40<<20 {
		t.Errorf("%d look-ups by id and by key of a 9 MiB notification allocated %d MiB; want at most 40 MiB (they need its id only)",
			2*lookups, got>>20)
	}
}
