package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/schedule"
	"github.com/notifyd/notifyd/sdk/wire"
)

// A page of dead letters reads up to 16 MiB past its first row (outbox's
// MaxPageBytes; the first row up to 5 MiB), and its answer is a second copy
// of it. A token holder may run as many pages at once as it has
// connections (64 per address, 256 in all): 24 pages of 20 MiB whose
// clients read their answers only once every page had answered held
// 24 × 40 MiB of heap at once. The pages' answers now hold a bounded share
// (httpguard.Answers, charged by each page's read bound): the rest wait and
// are answered 503 with Retry-After naming the bound, the heap stays within
// a few pages, and a request that reads no page (/healthz), or another
// client's (one notification: it holds its own read bound, and the pages'
// client holds at most its share) is served meanwhile. Not parallel: it
// reads the process's heap.
func TestServer_PageAnswersInFlightBounded(t *testing.T) {
	b := setup(t, setupOptions{edit: func(c *config.Config) { c.HTTP.TrustedProxies = []string{"127.0.0.1/32", "::1/128"} }})
	// 4 dead letters of 1 MiB of payload and 4 MiB of result each: one page
	// of 20 MiB (the page stops at the row past 16 MiB).
	big := rows("orders", "a", "b", "c", "d")
	for i := range big {
		big[i].Payload = json.RawMessage(`{"p":"` + strings.Repeat("x", 1<<20-64) + `"}`)
	}
	ids := b.deadLetterRows("orders", big)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET result = jsonb_build_object('r', repeat('y', $2)) WHERE id = ANY($1)`,
		ids, 4<<20-64); err != nil {
		t.Fatal(err)
	}
	small := b.insert("alerts", "someone")[0]

	const pages = 24
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)

	// Each page's client takes the answer's head, then waits until every
	// page has answered before it reads a byte: the pages' handlers are
	// blocked writing with their rows and answers in memory.
	type result struct {
		status int
		body   []byte
		retry  string
	}
	var (
		answered sync.WaitGroup
		done     sync.WaitGroup
		read     = make(chan struct{})
		results  = make([]result, pages)
	)
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: pages}}
	answered.Add(pages)
	done.Add(pages)
	for i := range pages {
		go func() {
			defer done.Done()
			once := sync.OnceFunc(answered.Done)
			defer once()
			req, _ := http.NewRequestWithContext(b.ctx, "GET", b.url+"/v1/dlq?channel=orders&limit=1000", nil)
			req.Header.Set("Authorization", "Bearer "+tokenA)
			req.Header.Set("X-Forwarded-For", "10.0.0.1") // one client, behind a trusted proxy
			res, err := client.Do(req)
			if err != nil {
				t.Errorf("page %d: %v", i, err)
				return
			}
			defer res.Body.Close()
			once()
			<-read
			var body []byte
			if res.StatusCode == 200 {
				n, _ := io.Copy(io.Discard, res.Body)
				body = fmt.Appendf(nil, "%d bytes", n)
			} else {
				body, _ = io.ReadAll(io.LimitReader(res.Body, 4096))
			}
			results[i] = result{res.StatusCode, body, res.Header.Get("Retry-After")}
		}()
	}

	// The heap's peak while the pages answer.
	var peak uint64
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	// Requests that read no page are served while the pages hold their
	// share: not queued behind them.
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	for _, path := range []string{"/healthz", fmt.Sprintf("/v1/notifications/%d", small)} {
		req, _ := http.NewRequestWithContext(ctx, "GET", b.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+tokenA)
		req.Header.Set("X-Forwarded-For", "10.0.0.2") // another client
		res, err := (&http.Client{}).Do(req)
		if err != nil {
			t.Fatalf("GET %s while pages are answered: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s while pages are answered: %d, want 200", path, res.StatusCode)
		}
	}

	answered.Wait()
	time.Sleep(200 * time.Millisecond) // a few more samples with every answer begun
	close(stop)
	<-sampled
	close(read)
	done.Wait()

	held := int64(peak) - int64(base.HeapInuse)
	t.Logf("%d pages of 20 MiB at once: heap in use grew by %d MiB at its peak", pages, held>>20)
	if held > 320<<20 {
		t.Errorf("%d pages of 20 MiB at once took the heap %d MiB past where it was; want at most 320 MiB (a bounded number of pages at once)",
			pages, held>>20)
	}
	served := 0
	for i, r := range results {
		switch {
		case r.status == 200:
			served++
		case r.status == 503:
			var eb wire.ErrorBody
			if err := json.Unmarshal(r.body, &eb); err != nil || !strings.Contains(eb.Error.Message, "answers in flight") || r.retry == "" {
				t.Errorf("page %d refused: %d %s (Retry-After %q); want 503 with Retry-After naming the bound on answers in flight",
					i, r.status, r.body, r.retry)
			}
		default:
			t.Errorf("page %d: %d %s; want 200, or 503 when the bound is full", i, r.status, r.body)
		}
	}
	if served == 0 {
		t.Errorf("no page of the %d was served: %+v", pages, results[0])
	}
}

// The bound's charges are the stores' own bounds: a page stops past
// outbox.MaxPageBytes, a job's template reads back within
// schedule.MaxTemplateReadBytes.
func TestServer_PageChargesAreTheStoresBounds(t *testing.T) {
	t.Parallel()
	if httpguard.PageBytes != outbox.MaxPageBytes {
		t.Errorf("httpguard.PageBytes = %d, outbox.MaxPageBytes = %d: keep them equal", httpguard.PageBytes, outbox.MaxPageBytes)
	}
	if httpguard.JobBytes < 2*schedule.MaxTemplateReadBytes {
		t.Errorf("httpguard.JobBytes = %d, less than twice schedule.MaxTemplateReadBytes (%d)", httpguard.JobBytes, schedule.MaxTemplateReadBytes)
	}
	if got, want := httpguard.PageCharge(1000, httpguard.NotificationBytes), int64(outbox.MaxPageBytes+httpguard.NotificationBytes); got != want {
		t.Errorf("a page of 1,000 dead letters is charged %d, want %d (its read bound)", got, want)
	}
}
