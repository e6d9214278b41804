package sdktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Recipient prefixes FakeBatchAPI understands: a recipient that starts with
// one is answered so, whatever follows.
const (
	// RejectPrefix: the fake refuses the recipient for good ("rejected"):
	// the message's verdict must be PERMANENT.
	RejectPrefix = "reject:"
	// ThrottlePrefix: the fake throttles the recipient ("throttled"): the
	// message's verdict must be TRANSIENT.
	ThrottlePrefix = "retry:"
	// OmitPrefix: the fake leaves the recipient out of its answer, as some
	// providers do: the message's verdict must be TRANSIENT (it was not
	// accepted; a retry may send it again, never lose it).
	OmitPrefix = "omit:"
)

// Statuses of FakeBatchAPI's per-item results.
const (
	FakeAccepted  = "accepted"
	FakeRejected  = "rejected"
	FakeThrottled = "throttled"
	FakeOmitted   = "omitted" // recorded in Items, never sent in an answer
)

// FakeBatchMaxItems is how many items one request to FakeBatchAPI may
// carry by default; more are answered 413.
const FakeBatchMaxItems = 1000

// FakeBatchAPI is a fake batch provider on loopback for a BatchSender's
// tests: it takes many recipients in one request and answers per recipient,
// in shuffled order, as real providers are allowed to. A BatchSender that
// matches answers to messages by position gets wrong verdicts from it; one
// that matches by the key it sent gets the right ones. Set it as
// Features.BatchAPI and the conformance run checks exactly that ("Send/batch
// answered out of order").
//
// A request is a POST to URL with a JSON body
//
//	{"messages": [{"key": "17", "recipient": "user-1", "payload": {…}}, …]}
//
// where key is the sender's own per-message key, unique in the request
// (Message.ID as a string is the natural one). The answer is 200 with
//
//	{"results": [{"key": "18", "status": "rejected", "error": "unknown recipient"},
//	             {"key": "17", "status": "accepted", "message_id": "fake-1"}, …]}
//
// one result per item (status accepted, rejected or throttled, by the
// recipient's prefix: RejectPrefix, ThrottlePrefix; OmitPrefix leaves it
// out), never in the request's order when it has two items or more. A
// malformed request is answered 400 with {"error": "…"} naming what is
// wrong (a missing or repeated key included), more than FakeBatchMaxItems
// items 413, and FailNext makes whole requests fail.
//
// The order comes from a seed: SDKTEST_SEED in the environment, else the
// clock. When the test fails, the seed is logged; run again with
// SDKTEST_SEED set to it (or call SetSeed) to get the same order.
type FakeBatchAPI struct {
	// URL is where to POST batches (an httptest.Server on 127.0.0.1).
	URL string

	mu       sync.Mutex
	seed     int64
	rng      *rand.Rand
	inOrder  bool
	maxItems int
	fail     []int // statuses of the next requests to fail
	requests int
	items    []FakeBatchItem
}

// FakeBatchItem is one item FakeBatchAPI received, with how it answered.
type FakeBatchItem struct {
	Key       string
	Recipient string
	Payload   json.RawMessage
	// Status is FakeAccepted, FakeRejected, FakeThrottled or FakeOmitted.
	Status string
	// MessageID is the id an accepted item was given ("fake-1", …).
	MessageID string
	// Request numbers the request that carried the item, from 1.
	Request int
}

type fakeBatchRequest struct {
	Messages []struct {
		Key       *string         `json:"key"`
		Recipient string          `json:"recipient"`
		Payload   json.RawMessage `json:"payload"`
	} `json:"messages"`
}

type fakeBatchResult struct {
	Key       string `json:"key"`
	Status    string `json:"status"`
	MessageID string `json:"message_id,omitempty"`
	Error     string `json:"error,omitempty"`
}

// maxFakeBatchBody bounds a request body the fake reads.
const maxFakeBatchBody = 64 << 20

// NewFakeBatchAPI starts a FakeBatchAPI, stopped when t's test ends.
func NewFakeBatchAPI(t testing.TB) *FakeBatchAPI {
	t.Helper()
	seed := time.Now().UnixNano()
	if env := os.Getenv("SDKTEST_SEED"); env != "" {
		n, err := strconv.ParseInt(env, 10, 64)
		if err != nil {
			t.Fatalf("sdktest: SDKTEST_SEED=%q is not an integer", env)
		}
		seed = n
	}
	f := &FakeBatchAPI{maxItems: FakeBatchMaxItems}
	f.SetSeed(seed)
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		if t.Failed() {
			t.Logf("sdktest: %s", f.seedNote())
		}
	})
	return f
}

// SetSeed sets the seed of the answers' order (and restarts its sequence).
func (f *FakeBatchAPI) SetSeed(seed int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seed, f.rng = seed, rand.New(rand.NewSource(seed))
}

// Seed is the seed of the answers' order.
func (f *FakeBatchAPI) Seed() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seed
}

func (f *FakeBatchAPI) seedNote() string {
	return fmt.Sprintf("FakeBatchAPI answered in shuffled order with seed %d; run again with SDKTEST_SEED=%d for the same order", f.Seed(), f.Seed())
}

// InOrder makes the fake answer in the request's order (on) or shuffled
// (off, the default). Only for a test about something else: in order, a
// sender that matches by position looks right.
func (f *FakeBatchAPI) InOrder(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inOrder = on
}

// SetMaxItems sets how many items a request may carry (more: 413).
func (f *FakeBatchAPI) SetMaxItems(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxItems = n
}

// FailNext makes the next n requests fail as a whole with HTTP status (503,
// 401, …) and no results: every message they carried must get that
// request's verdict. Their items are not recorded.
func (f *FakeBatchAPI) FailNext(n, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.fail = append(f.fail, status)
	}
}

// Requests is how many requests the fake has received, failed ones
// included.
func (f *FakeBatchAPI) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// Items is every item of every answered request, in the order received.
func (f *FakeBatchAPI) Items() []FakeBatchItem {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FakeBatchItem(nil), f.items...)
}

// Accepted counts, by key, how often the fake accepted an item: a key
// missing was never accepted, and a count over 1 was delivered more than
// once.
func (f *FakeBatchAPI) Accepted() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := map[string]int{}
	for _, it := range f.items {
		if it.Status == FakeAccepted {
			n[it.Key]++
		}
	}
	return n
}

func (f *FakeBatchAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFakeBatchBody+1))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if len(f.fail) > 0 {
		status := f.fail[0]
		f.fail = f.fail[1:]
		fakeError(w, status, "request failed (FailNext)")
		return
	}
	if r.Method != http.MethodPost {
		fakeError(w, http.StatusMethodNotAllowed, "POST a batch, not "+r.Method)
		return
	}
	if err != nil || len(body) > maxFakeBatchBody {
		fakeError(w, http.StatusBadRequest, fmt.Sprintf("read the body (at most %d bytes): %v", maxFakeBatchBody, err))
		return
	}
	var req fakeBatchRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fakeError(w, http.StatusBadRequest, `body is not {"messages":[{"key","recipient","payload"},…]}: `+err.Error())
		return
	}
	switch n := len(req.Messages); {
	case n == 0:
		fakeError(w, http.StatusBadRequest, "messages is empty")
		return
	case n > f.maxItems:
		fakeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%d messages in one request; at most %d", n, f.maxItems))
		return
	}
	seen := make(map[string]bool, len(req.Messages))
	for i, m := range req.Messages {
		switch {
		case m.Key == nil:
			fakeError(w, http.StatusBadRequest, fmt.Sprintf("messages[%d] has no key: send each message's own key (Message.ID) to match the results by", i))
			return
		case seen[*m.Key]:
			fakeError(w, http.StatusBadRequest, fmt.Sprintf("messages[%d]: key %q is in the request twice; keys must be unique in a request", i, *m.Key))
			return
		}
		seen[*m.Key] = true
	}

	results := make([]fakeBatchResult, 0, len(req.Messages))
	for _, m := range req.Messages {
		it := FakeBatchItem{Key: *m.Key, Recipient: m.Recipient, Payload: m.Payload, Request: f.requests}
		res := fakeBatchResult{Key: it.Key}
		switch {
		case strings.HasPrefix(m.Recipient, RejectPrefix):
			it.Status, res.Error = FakeRejected, "unknown recipient"
		case strings.HasPrefix(m.Recipient, ThrottlePrefix):
			it.Status, res.Error = FakeThrottled, "recipient throttled, try later"
		case strings.HasPrefix(m.Recipient, OmitPrefix):
			it.Status = FakeOmitted
		default:
			it.Status = FakeAccepted
			it.MessageID = "fake-" + strconv.Itoa(len(f.items)+1)
			res.MessageID = it.MessageID
		}
		res.Status = it.Status
		f.items = append(f.items, it)
		if it.Status != FakeOmitted {
			results = append(results, res)
		}
	}
	if !f.inOrder {
		f.shuffle(results)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
}

// shuffle puts rs in a seeded random order that is never the given one
// (two results or more), and in which, when the results differ in status,
// at least one position holds a status other than the one it held: a
// sender reading results by position cannot come out right by chance.
func (f *FakeBatchAPI) shuffle(rs []fakeBatchResult) {
	n := len(rs)
	if n < 2 {
		return
	}
	perm := f.rng.Perm(n)
	sameStatus, identity := true, true
	for k, p := range perm {
		sameStatus = sameStatus && rs[p].Status == rs[k].Status
		identity = identity && p == k
	}
	if sameStatus {
		a, b := -1, -1
		for k := range rs {
			if rs[k].Status != rs[0].Status {
				a, b = 0, k
				break
			}
		}
		switch {
		case a >= 0:
			perm[a], perm[b] = perm[b], perm[a]
		case identity:
			perm = append(perm[1:], perm[0])
		}
	}
	out := make([]fakeBatchResult, n)
	for k, p := range perm {
		out[k] = rs[p]
	}
	copy(rs, out)
}

func fakeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
