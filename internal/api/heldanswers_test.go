package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/wire"
)

// heldAnswer is one of heldGets' answers: its status, its body (read's
// summary for a 200, the first 4 KiB otherwise) and its Retry-After.
type heldAnswer struct {
	status int
	body   []byte
	retry  string
}

// heldGets sends n GETs of path at once, whose clients take an answer's
// head and then wait until every GET has answered before they read a byte
// (read reads a 200's body), so the handlers are blocked writing with their
// rows and answers in memory. during runs while they are held. It returns
// the answers and how far the heap in use grew past where it was, at its
// peak, sampled every 20 ms. A test calling it must not run in parallel:
// it reads the process's heap.
func (b *bundle) heldGets(t *testing.T, n int, path string, header http.Header, read func(i int, body io.Reader) []byte, during func()) ([]heldAnswer, int64) {
	t.Helper()
	growth := sampleHeap(20 * time.Millisecond)
	var (
		answered, done sync.WaitGroup
		release        = make(chan struct{})
		results        = make([]heldAnswer, n)
	)
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	answered.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			once := sync.OnceFunc(answered.Done)
			defer once()
			req, _ := http.NewRequestWithContext(b.ctx, "GET", b.url+path, nil)
			for k, v := range header {
				req.Header[k] = v
			}
			res, err := client.Do(req)
			if err != nil {
				t.Errorf("GET %d of %s: %v", i, path, err)
				return
			}
			defer res.Body.Close()
			once()
			<-release
			var body []byte
			if res.StatusCode == 200 {
				body = read(i, res.Body)
			} else {
				body, _ = io.ReadAll(io.LimitReader(res.Body, 4096))
			}
			results[i] = heldAnswer{res.StatusCode, body, res.Header.Get("Retry-After")}
		}()
	}
	if during != nil {
		during()
	}
	answered.Wait()
	time.Sleep(200 * time.Millisecond) // a few more samples with every answer begun
	held := growth()
	close(release)
	done.Wait()
	return results, held
}

// sampleHeap collects garbage, notes the heap in use and samples it every
// interval until the function it returns is called, which answers how far
// it grew past where it was, at its peak. Not for tests in parallel.
func sampleHeap(every time.Duration) func() int64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
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
			case <-time.After(every):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-sampled
		return int64(peak) - int64(base.HeapInuse)
	}
}

// servedOrRefused checks every answer is a 200, or a 503 with Retry-After
// naming the bound on answers in flight, and that one at least was served.
func servedOrRefused(t *testing.T, what string, results []heldAnswer) {
	t.Helper()
	served := 0
	for i, r := range results {
		switch {
		case r.status == 200:
			served++
		case r.status == 503:
			var eb wire.ErrorBody
			if err := json.Unmarshal(r.body, &eb); err != nil || !strings.Contains(eb.Error.Message, "answers in flight") || r.retry == "" {
				t.Errorf("%s %d refused: %d %s (Retry-After %q); want 503 with Retry-After naming the bound on answers in flight",
					what, i, r.status, r.body, r.retry)
			}
		default:
			t.Errorf("%s %d: %d %s; want 200, or 503 when the bound is full", what, i, r.status, r.body)
		}
	}
	if served == 0 {
		t.Errorf("no %s of the %d was served: %+v", what, len(results), results[0])
	}
}

// heapBounded logs how far what took the heap past where it was (held), and
// fails past most bytes; why says what most stands for.
func heapBounded(t *testing.T, what string, held, most int64, why string) {
	t.Helper()
	t.Logf("%s: heap in use grew by %d MiB at its peak", what, held>>20)
	if held > most {
		t.Errorf("%s took the heap %d MiB past where it was; want at most %d MiB (%s)", what, held>>20, most>>20, why)
	}
}

// bigDeadLetterPage writes 4 dead letters on channel orders of 1 MiB of
// payload and 4 MiB of result each: one page of 20 MiB (the page stops at
// the row past 16 MiB).
func (b *bundle) bigDeadLetterPage(t *testing.T) {
	t.Helper()
	big := rows("orders", "a", "b", "c", "d")
	for i := range big {
		big[i].Payload = json.RawMessage(`{"p":"` + strings.Repeat("x", 1<<20-64) + `"}`)
	}
	ids := b.deadLetterRows("orders", big)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE notifications SET result = jsonb_build_object('r', repeat('y', $2)) WHERE id = ANY($1)`,
		ids, 4<<20-64); err != nil {
		t.Fatal(err)
	}
}
