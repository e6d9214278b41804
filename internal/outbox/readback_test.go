package outbox_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"

	"github.com/notifyd/notifyd/sdk/wire"
)

// TestJSONReadBack_postgres holds wire.JSONReadBack to what Postgres really
// prints: for a single number exactly (but a zero integer part), and for
// whole documents never less. The claim, the API and EnqueueTx all rely on it
// as an upper bound of the bytes a payload reads back as.
func TestJSONReadBack_postgres(t *testing.T) {
	b := setup(t)
	r := rand.New(rand.NewPCG(26, 1))
	number := func() string {
		var sb strings.Builder
		if r.IntN(3) == 0 {
			sb.WriteByte('-')
		}
		if r.IntN(4) == 0 {
			sb.WriteByte('0')
		} else {
			sb.WriteString(fmt.Sprint(1 + r.IntN(99999)))
		}
		if r.IntN(2) == 0 {
			sb.WriteString("." + fmt.Sprint(r.IntN(1000)))
			if r.IntN(3) == 0 {
				sb.WriteString("000")
			}
		}
		if r.IntN(2) == 0 {
			sb.WriteString([]string{"e", "E", "e+", "e-", "E-"}[r.IntN(5)] + fmt.Sprint(r.IntN(60)))
		}
		return sb.String()
	}
	var value func(depth int) string
	value = func(depth int) string {
		switch k := r.IntN(6); {
		case depth > 3 || k < 2:
			return number()
		case k == 2:
			return []string{`"x"`, `"a\"b:,"`, `"\u00e9\/"`, `true`, `null`, `""`}[r.IntN(6)]
		case k == 3:
			parts := make([]string, r.IntN(4))
			for i := range parts {
				parts[i] = value(depth + 1)
			}
			return " [ " + strings.Join(parts, " ,\n") + "]"
		default:
			parts := make([]string, r.IntN(4))
			for i := range parts {
				parts[i] = fmt.Sprintf(`"k%d" : %s`, i, value(depth+1))
			}
			return "{" + strings.Join(parts, ",") + " }"
		}
	}
	var problems []string
	for i := range 2000 {
		doc := value(0)
		if i%2 == 0 {
			doc = number()
		}
		size, problem := wire.JSONReadBack([]byte(doc))
		if problem != "" {
			continue
		}
		var pg int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT octet_length($1::jsonb::text)`, doc).Scan(&pg); err != nil {
			t.Fatalf("Postgres refused %q: %v", doc, err)
		}
		// Exact but for a zero integer part (0.5e3, -0), which the bound
		// counts one digit too many.
		exact := i%2 == 0 && !strings.HasPrefix(strings.TrimPrefix(doc, "-"), "0")
		if size < pg || exact && size != pg {
			problems = append(problems, fmt.Sprintf("%q: JSONReadBack %d, Postgres %d", doc, size, pg))
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d documents read back otherwise than JSONReadBack says; the first:\n%s",
			len(problems), strings.Join(problems[:min(10, len(problems))], "\n"))
	}
}

// A payload written past the enqueue checks (by SQL of the application's
// own) that reads back past the bound is claimed without it: Postgres
// measures it — or, for a number that would print past 100 characters, finds
// it without printing anything — and neither it nor its batch-mates' claim
// carries it.
func TestStore_Claim_payloadReadBackBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.insert(t, notif(1), notif(2), notif(3), notif(4))
	// 20 numbers of 100,001 digits: 2 MB read back, 219 bytes stored.
	huge := `{"a":[` + strings.TrimSuffix(strings.Repeat("1e100000,", 20), ",") + `]}`
	long := `{"s":"` + strings.Repeat("x", 2_000_000) + `"}`
	for _, w := range []struct {
		id      int64
		payload string
	}{{ids[1], huge}, {ids[2], long}} {
		if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET payload = $1::jsonb WHERE id = $2`, w.payload, w.id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.store.Relay(b.ctx, time.Now(), 10); err != nil {
		t.Fatal(err)
	}
	got, err := b.store.Claim(b.ctx, ids, time.Now(), time.Minute)
	if err != nil || len(got) != 4 {
		t.Fatalf("Claim = %+v, %v", got, err)
	}
	for i, c := range got {
		switch {
		case c.Kind != outbox.ClaimSend:
			t.Errorf("row %d: %s, want send", i, c.Kind)
		case i == 1 && (c.Payload != nil || c.PayloadBytes != -1):
			t.Errorf("the expanding row: payload %d bytes, PayloadBytes %d; want none, not printed (-1)", len(c.Payload), c.PayloadBytes)
		case i == 2 && (c.Payload != nil || c.PayloadBytes < 2_000_000):
			t.Errorf("the long row: payload %d bytes, PayloadBytes %d; want none, and its size", len(c.Payload), c.PayloadBytes)
		case (i == 0 || i == 3) && string(c.Payload) != fmt.Sprintf(`{"n": %d}`, i+1):
			t.Errorf("row %d: payload %s, want its own", i, c.Payload)
		}
	}
	for id, want := range map[int64]string{ids[1]: "has a number that reads back past 100 characters", ids[2]: "reads back as 2000"} {
		n, err := b.store.Get(b.ctx, id)
		if err != nil || len(n.Payload) > 200 || !strings.Contains(string(n.Payload), want) {
			t.Errorf("Get(%d) = %.200s, %v; want a note: %q", id, n.Payload, err, want)
		}
	}
}

// A payload nested deeper than Postgres' jsonpath walk can go (the read-back
// bound's walk for expanding numbers recurses once a level, within
// max_stack_depth: about 10,500 levels at the default 2 MB) yet shallow
// enough for jsonb to store (its parser goes deeper): 24 KB of 12,000 arrays,
// written by an application's SQL. Every read that printed it failed with
// "stack depth limit exceeded" (54001) — and with it the whole dead-letter
// page it was on, of its channel and of every channel, and the recipient's
// lookup page: one row hid every dead letter beside it. The row's own
// payload now reads as a note naming why; the rest of the page as stored.
func TestStore_ReadsAPayloadTooDeepToWalk(t *testing.T) {
	t.Parallel()
	b := setup(t)
	deep := deepestUnwalkable(t, b)
	ok := b.insert(t, outbox.NewNotification{Channel: "ch", Recipient: "r", Payload: json.RawMessage(`{"n": 1}`), IdempotencyKey: "ok"})[0]
	var bad int64
	if err := b.db.Pool.QueryRow(b.ctx, `INSERT INTO notifications (channel, recipient, payload, idempotency_key)
		VALUES ('ch', 'r', $1::jsonb, 'bad') RETURNING id`, deep).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	later := b.insert(t, outbox.NewNotification{Channel: "ch", Recipient: "r", Payload: json.RawMessage(`{"n": 3}`)})[0]
	b.force(t, outbox.StatusFailed, 1, time.Now(), ok, bad, later)

	check := func(what string, ns []outbox.Notification, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		got := map[int64]string{}
		for _, n := range ns {
			got[n.ID] = string(n.Payload)
		}
		if len(got) != 3 || got[ok] != `{"n": 1}` || got[later] != `{"n": 3}` {
			t.Errorf("%s: %d rows, the others' payloads %.100q and %.100q; want all 3, theirs as stored", what, len(got), got[ok], got[later])
		}
		if p := got[bad]; len(p) > 1000 || !strings.Contains(p, "notifyd_omitted") || !strings.Contains(p, "stack depth") {
			t.Errorf("%s: the deep row's payload reads %.200q; want a note naming why it was not read", what, p)
		}
	}
	ns, _, err := b.store.ListFailed(b.ctx, "ch", 0, 10)
	check("ListFailed(ch)", ns, err)
	ns, _, err = b.store.ListFailed(b.ctx, "", 0, 10)
	check("ListFailed(every channel)", ns, err)
	ns, _, err = b.store.ListByRecipient(b.ctx, "r", 0, 10)
	check("ListByRecipient", ns, err)
	one, err := b.store.Get(b.ctx, bad)
	if err == nil {
		check("Get", []outbox.Notification{*one, {ID: ok, Payload: json.RawMessage(`{"n": 1}`)}, {ID: later, Payload: json.RawMessage(`{"n": 3}`)}}, nil)
	} else {
		t.Errorf("Get(%d): %v", bad, err)
	}
	if _, err := b.store.GetByIdempotencyKey(b.ctx, "bad"); err != nil {
		t.Errorf("GetByIdempotencyKey: %v", err)
	}
}

// deepestUnwalkable is a JSON document of nested arrays that jsonb stores
// but jsonb_path_exists cannot walk within this server's max_stack_depth.
func deepestUnwalkable(t *testing.T, b *bundle) string {
	t.Helper()
	for depth := 10_000; depth <= 100_000; depth += depth / 10 {
		doc := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		var n int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT octet_length($1::jsonb::text)`, doc).Scan(&n); err != nil {
			break // past what the parser takes
		}
		var found bool
		err := b.db.Pool.QueryRow(b.ctx, `SELECT jsonb_path_exists($1::jsonb, 'lax $.** ? (@.type() == "number")')`, doc).Scan(&found)
		if outbox.IsRowError(err) {
			return doc
		}
	}
	t.Fatal("no nesting depth that jsonb stores and jsonpath cannot walk on this server: the test needs another way to build one")
	return ""
}

// A result is read back within MaxResultBytes, as a payload is, but it was
// measured by printing it: 12,000 × 1e100000, a few KB as jsonb (an
// application's SQL, a restore), prints past 1 GB, so every read of its row
// made Postgres build a gigabyte and fail "out of memory" (53200) — the
// row's GET, and every dead-letter page and recipient page it was on. It is
// walked for a number that would print past 100 characters first, as the
// payload is (BoundedJSON), and reads as a note, never printed.
func TestStore_ResultReadBackBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.insertN(t, 2)
	b.force(t, outbox.StatusFailed, 1, time.Now(), ids...)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET result = (SELECT jsonb_agg('1e100000'::jsonb) FROM generate_series(1, 12000))
		WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET result = '{"id": "m-1"}' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	ns, _, err := b.store.ListFailed(b.ctx, "ch", 0, 10)
	if err != nil || len(ns) != 2 {
		t.Fatalf("ListFailed: %d rows, %v; want both", len(ns), err)
	}
	if r := string(ns[0].Result); len(r) > 200 || !strings.Contains(r, "has a number that reads back past 100 characters") {
		t.Errorf("the expanding result reads %.200q; want a note saying why it was not printed", r)
	}
	if r := string(ns[1].Result); r != `{"id": "m-1"}` {
		t.Errorf("the other row's result reads %.200q; want it as stored", r)
	}
	if n, err := b.store.Get(b.ctx, ids[0]); err != nil || len(n.Result) > 200 {
		t.Errorf("Get: %v, result of %d bytes; want a note", err, len(n.Result))
	}
}
