package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// bigRow makes id the largest notification a GET reads: a 1 MiB payload, a
// 4 MiB result and 1,000 attempts of a 4 KiB error (written as an
// application's SQL may: every value within the database's CHECKs).
func (b *bundle) bigRow(id int64) {
	b.t.Helper()
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET payload = jsonb_build_object('p', repeat('x', $2)),
	       result = jsonb_build_object('r', repeat('y', $3)) WHERE id = $1`, id, 1<<20-64, 4<<20-64); err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO notification_attempts
	    (notification_id, attempt, started_at, finished_at, outcome, provider_status, provider_code, error)
	  SELECT $1, g, now(), now(), 'TRANSIENT', 500, repeat('c', 256), repeat('"', 4096) FROM generate_series(1, 1000) g`, id); err != nil {
		b.t.Fatal(err)
	}
}

// rawGet sends a GET on a connection of its own, from client (the
// X-Forwarded-For a trusted proxy would add), and returns the connection
// unread.
func (b *bundle) rawGet(path, client string) net.Conn {
	b.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: notifyd\r\nAuthorization: Bearer %s\r\nX-Forwarded-For: %s\r\n\r\n",
		path, tokenA, client); err != nil {
		b.t.Fatal(err)
	}
	return c
}

// A notification read alone is up to a 1 MiB payload, a 4 MiB result and
// 1,000 attempts of a 4 KiB error: ~9 MiB read and as much again encoded
// (more: JSON escapes each `"` of an error). GET /v1/notifications/{id}
// held nothing of the bound on answers in flight, so 24 GETs of such a row
// whose clients read only once every GET had answered grew the heap by
// ~24 × 20 MiB. It now holds its read bound (httpguard.NotificationGetBytes)
// as a page does: the rest wait, and are answered 503 with Retry-After
// naming the bound. Not parallel: it reads the process's heap.
func TestServer_NotificationGetHoldsAnswersInFlight(t *testing.T) {
	b := setup(t, setupOptions{})
	id := b.insert("orders", "big")[0]
	b.bigRow(id)

	const gets = 24
	header := http.Header{"Authorization": {"Bearer " + tokenA}}
	results, held := b.heldGets(t, gets, fmt.Sprintf("/v1/notifications/%d", id), header, func(i int, body io.Reader) []byte {
		var n wire.NotificationInfo
		if err := json.NewDecoder(body).Decode(&n); err != nil || len(n.History) != 1000 {
			t.Errorf("GET %d: %d attempts, %v", i, len(n.History), err)
		}
		return nil
	}, nil)
	heapBounded(t, fmt.Sprintf("%d GETs of a 9 MiB notification at once", gets), held, 400<<20, "a bounded number at once: 991 MiB without a bound")
	servedOrRefused(t, "GET", results)
}

// A page is held until its client has read it, for up to the write
// timeout. One client (an address) asking for pages of 20 MiB on
// connections it never reads held 21 MiB of the 64 MiB bound each: three
// of them held it all, and every other client's page, however small,
// waited 5 s and got 503 for as long as they stayed. A client now holds at
// most its share of the bound (httpguard.AnswerShare: its connections'
// share, at least one page at its largest), so another client's pages are
// served while it stalls.
func TestServer_SlowReaderHoldsItsShareOnly(t *testing.T) {
	b := setup(t, setupOptions{edit: func(c *config.Config) { c.HTTP.TrustedProxies = []string{"127.0.0.1/32", "::1/128"} }})
	b.bigDeadLetterPage(t)
	small := b.deadLetter("alerts", "someone")[0]

	// The slow client: six pages of 20 MiB, not a byte of them read.
	for range 6 {
		b.rawGet("/v1/dlq?channel=orders&limit=1000", "10.0.0.1")
	}
	time.Sleep(2 * time.Second) // each has read its page and is blocked writing it, or waits for the bound

	// Another client's pages, small and large, are served meanwhile.
	for _, path := range []string{"/v1/dlq?channel=alerts&limit=1", fmt.Sprintf("/v1/notifications/%d", small), "/v1/dlq?channel=orders&limit=1000"} {
		start := time.Now()
		c := b.rawGet(path, "10.0.0.2")
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET %s from another client while one reads nothing: %v", path, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s from another client while one reads nothing: %d after %s: %.300s; want 200",
				path, res.StatusCode, time.Since(start).Round(time.Millisecond), body)
		}
	}
}

// The bounds the charges assume are the stores' own.
func TestServer_OneRowChargesAreTheStoresBounds(t *testing.T) {
	t.Parallel()
	if httpguard.History != outbox.MaxHistory {
		t.Errorf("httpguard.History = %d, outbox.MaxHistory = %d: keep them equal", httpguard.History, outbox.MaxHistory)
	}
	if httpguard.ReceiptBytes < outbox.MaxReceiptDetail+wire.MaxProviderCodeLen {
		t.Errorf("httpguard.ReceiptBytes = %d, less than a receipt's detail and code", httpguard.ReceiptBytes)
	}
}

// The store cuts a page of dead letters at 16 MiB of rows as it reads them
// (outbox.MaxPageBytes), but JSON writes a control character as six bytes:
// 1,000 dead letters whose recipient, key and error are control characters
// (7 KiB of text each, as an application's SQL may write them) were one
// answer of 43 MiB, built twice (the encoder's buffer and the answer), past
// the page's charge. The answer is now cut after the row whose encoding
// passes 16 MiB, with next_after, and the pages that follow hold every
// dead letter once.
func TestServer_DLQPageEncodedWithinItsBound(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO notifications (channel, recipient, payload, status, attempts, last_error, idempotency_key)
	  SELECT 'orders', repeat(chr(1), 1000) || g, '{}', 'FAILED', 1, repeat(chr(1), 4096), repeat(chr(1), 2000) || g
	    FROM generate_series(1, 1000) g`); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	after := int64(0)
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatalf("more than 10 pages for 1,000 dead letters")
		}
		res := b.do("GET", fmt.Sprintf("/v1/dlq?channel=orders&limit=1000&after=%d", after), "")
		if res.status != 200 {
			t.Fatalf("page after %d: %d %.300s", after, res.status, res.body)
		}
		if len(res.body) > httpguard.PageBytes+64<<10 {
			t.Errorf("page after %d is %d bytes, want at most %d (16 MiB past its first row)", after, len(res.body), httpguard.PageBytes+64<<10)
		}
		var p wire.DLQPage
		if err := json.Unmarshal(res.body, &p); err != nil {
			t.Fatal(err)
		}
		for _, n := range p.Notifications {
			if seen[n.ID] {
				t.Errorf("dead letter %d on two pages", n.ID)
			}
			seen[n.ID] = true
		}
		if p.NextAfter == 0 {
			break
		}
		after = p.NextAfter
	}
	if len(seen) != 1000 {
		t.Errorf("the pages held %d of the 1,000 dead letters", len(seen))
	}
}

// A job's payload template reads back within 128 KiB, but the service
// hands it over decoded (wire.Job.Payload is a map[string]any): 128 KiB of
// `0, 0, …` is 3.4 MiB of Go values, 27 times the text. GET /v1/jobs was
// charged a job's text (256 KiB, at most 16 MiB a page), so the bound let
// three pages of ~100 such jobs (as an application's SQL may write them)
// be read and decoded at once, ~400 MB each. A job is now charged what it
// may decode into (httpguard.JobBytes), a jobs page as many times as its
// limit, and a charge past the whole bound is read while no other answer
// is in flight. Not parallel: it reads the process's heap.
func TestServer_JobsPagesChargedDecoded(t *testing.T) {
	b := setup(t, setupOptions{edit: func(c *config.Config) { c.HTTP.TrustedProxies = []string{"127.0.0.1/32", "::1/128"} }})
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO jobs (kind, channel, audience, payload, state)
	  SELECT 'campaign', 'orders', '{"topic":"news"}', jsonb_build_object('a', (SELECT jsonb_agg(0) FROM generate_series(1, 43000))), 'DONE'
	    FROM generate_series(1, 200)`); err != nil {
		t.Fatal(err)
	}
	growth := sampleHeap(5 * time.Millisecond)
	const pages = 4
	var wg sync.WaitGroup
	statuses := make([]int, pages)
	for i := range pages {
		wg.Add(1)
		go func() { // each from a client of its own
			defer wg.Done()
			c := b.rawGet("/v1/jobs?limit=1000", fmt.Sprintf("10.0.1.%d", i+1))
			// A guard against a hang, not a timing: a page of ~100 jobs
			// decoded whole takes over a minute under -race on a machine
			// busy with the whole suite.
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Minute))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("page %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			statuses[i] = res.StatusCode
		}()
	}
	wg.Wait()
	held := growth()
	t.Logf("%d pages of ~100 jobs of 128 KiB templates, from %d clients: heap grew %d MiB at its peak (statuses %v)", pages, pages, held>>20, statuses)
	if held > 700<<20 {
		t.Errorf("%d jobs pages at once grew the heap by %d MiB; want at most 700 MiB (one page of ~400 MiB at a time)", pages, held>>20)
	}
	if !slices.Contains(statuses, 200) {
		t.Errorf("no jobs page was served: %v", statuses)
	}
}
