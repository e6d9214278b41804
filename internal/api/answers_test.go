package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/httpguard"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/internal/schedule"
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
	b.bigDeadLetterPage(t)
	small := b.insert("alerts", "someone")[0]

	const pages = 24
	// Each page's client takes the answer's head, then waits until every
	// page has answered before it reads a byte: the pages' handlers are
	// blocked writing with their rows and answers in memory.
	header := http.Header{"Authorization": {"Bearer " + tokenA}, "X-Forwarded-For": {"10.0.0.1"}} // one client, behind a trusted proxy
	results, held := b.heldGets(t, pages, "/v1/dlq?channel=orders&limit=1000", header, func(_ int, body io.Reader) []byte {
		n, _ := io.Copy(io.Discard, body)
		return fmt.Appendf(nil, "%d bytes", n)
	}, func() {
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
	})
	heapBounded(t, fmt.Sprintf("%d pages of 20 MiB at once", pages), held, 320<<20, "a bounded number of pages at once")
	servedOrRefused(t, "page", results)
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
