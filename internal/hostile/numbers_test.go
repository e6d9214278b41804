package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/client"
)

// expanding is issue 26's number bomb: n copies of 1e100000, which Postgres
// keeps in a few bytes and prints as 100,001 digits.
func expanding(n int) string {
	return `{"a":[` + strings.TrimSuffix(strings.Repeat("1e100000,", n), ",") + `]}`
}

// expandingNumbers is issue 26's first reproduction, black-box: the numbers
// are refused at every door (a single notification, a batch, a subscriber,
// the CLI), and rows written past the doors by SQL — 8 payloads of 2,500
// such numbers, which once stalled the claim past 90 s and killed the daemon
// out of memory on every restart — end FAILED with their size while the
// ordinary notifications claimed beside them are SENT, the daemon up and
// under 300 MB.
func expandingNumbers(t *testing.T, d *daemon) {
	ctx := context.Background()
	status, body := d.raw(t, "POST", "/v1/notifications", mustJSON(map[string]any{
		"channel": "hooks", "recipient": "n1", "payload": json.RawMessage(expanding(20))}))
	if !is4xxNaming(status, body, "$.a[0]") || !strings.Contains(body, "100001 characters") {
		t.Errorf("POST a payload of 20×1e100000: %d %.300s; want 4xx naming $.a[0] and its 100001 characters", status, body)
	}
	status, body = d.raw(t, "POST", "/v1/notifications", []byte(`{"notifications":[`+
		`{"channel":"hooks","recipient":"n2","payload":{"ok":1}},`+
		`{"channel":"hooks","recipient":"n3","payload":`+expanding(1)+`}]}`))
	if !is4xxNaming(status, body, "notifications[1].payload") {
		t.Errorf("POST a batch with one: %d %.300s; want 4xx naming notifications[1].payload", status, body)
	}
	status, body = d.raw(t, "PUT", "/v1/subscribers/x", []byte(`{"addresses":{"hooks":"x"},"attributes":`+expanding(1)+`}`))
	if !is4xxNaming(status, body, "$.a[0]") {
		t.Errorf("PUT a subscriber with one: %d %.300s; want 4xx naming $.a[0]", status, body)
	}
	if out, err := d.cli("send", "--channel", "hooks", "--recipient", "n4", "--payload", expanding(1)); err == nil || !strings.Contains(out, "100001") {
		t.Errorf("notifyd send with one: %v %.300s; want an error naming its size", err, out)
	}

	// Past the doors: rows as an application's own SQL would write them,
	// among ordinary ones, so they share claims.
	normal := enqueueTo(t, d, "hooks", "beside", 40)
	var bombs []int64
	rows, err := d.db.Pool.Query(ctx, `INSERT INTO notifications (channel, recipient, payload, status, due_at)
		SELECT 'hooks', 'bomb-' || g, $1::jsonb, 'PENDING', now() FROM generate_series(1, 8) g RETURNING id`, expanding(2500))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		bombs = append(bombs, id)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	normal = append(normal, enqueueTo(t, d, "hooks", "after", 40)...)
	// The ordinary ones first: nothing beside the bombs waits for them.
	got := d.waitFinal(t, normal, 90*time.Second)
	for _, id := range normal {
		if n := got[id]; n == nil || n.Status != client.StatusSent {
			t.Errorf("ordinary %d: %+v; want SENT", id, n)
		}
	}
	// The claim finds a bomb's numbers without printing them (a walk of
	// its jsonb), so the bombs are FAILED as fast as the rest.
	got = d.waitFinal(t, bombs, 90*time.Second)
	for _, id := range bombs {
		if n := got[id]; n == nil || n.Status != client.StatusFailed || !strings.Contains(n.LastError, "reads back") {
			t.Errorf("bomb %d: %+v; want FAILED naming its read-back size", id, n)
		}
	}
	// Reading one back is bounded too: its payload is a note of its size.
	status, body = d.raw(t, "GET", fmt.Sprintf("/v1/notifications/%d", bombs[0]), nil)
	if status != 200 || len(body) > 4096 || !strings.Contains(body, "notifyd_omitted") {
		t.Errorf("GET a bomb: %d, %d bytes %.300s; want 200, a few hundred bytes noting the payload's size", status, len(body), body)
	}
	d.alive(t)
	if rss := d.memory(t, "VmRSS"); rss > 300<<20 {
		t.Errorf("notifyd's resident memory is %d MB, want under 300", rss>>20)
	}
}
