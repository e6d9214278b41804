package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
)

// batchPlugin is a plugin for FakeBatchAPI's wire format, written as an
// author would: requests of at most perRequest recipients, results read
// back by key — or, with byPosition, by their place in the answer, the bug
// the fake's shuffled order exposes.
type batchPlugin struct {
	byPosition bool
	perRequest int
}

func (p *batchPlugin) Describe() sdk.Info { return sdk.Info{Name: "batch", Version: "1.0.0"} }

func (p *batchPlugin) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		URL string `json:"url"`
	}
	if err := req.Decode(&cfg); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(cfg.URL, "http://") {
		return nil, errors.New("config.url must be an http:// URL")
	}
	return &batchSender{url: cfg.URL, byPosition: p.byPosition, perRequest: max(p.perRequest, 1)}, nil
}

type batchSender struct {
	url        string
	byPosition bool
	perRequest int
}

type batchResult struct {
	Key       string `json:"key"`
	Status    string `json:"status"`
	MessageID string `json:"message_id"`
	Error     string `json:"error"`
}

func (s *batchSender) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	return s.SendBatch(ctx, []sdk.Message{m})[0]
}

func (s *batchSender) SendBatch(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
	vs := make([]sdk.Verdict, len(ms))
	for start := 0; start < len(ms); start += s.perRequest {
		group := ms[start:min(start+s.perRequest, len(ms))]
		results, err := s.post(ctx, group)
		if err != nil {
			for i := range group {
				vs[start+i] = sdk.ClassifyHTTP(nil, err)
			}
			continue
		}
		byKey := make(map[string]batchResult, len(results))
		for _, r := range results {
			byKey[r.Key] = r
		}
		for i, m := range group {
			r, ok := byKey[strconv.FormatInt(m.ID, 10)]
			if s.byPosition {
				r, ok = batchResult{}, i < len(results)
				if ok {
					r = results[i]
				}
			}
			vs[start+i] = verdictOf(r, ok)
		}
	}
	return vs
}

func verdictOf(r batchResult, ok bool) sdk.Verdict {
	switch {
	case !ok:
		return sdk.Transient("the provider's answer has no result for this message")
	case r.Status == FakeAccepted:
		return sdk.Success(json.RawMessage(strconv.Quote(r.MessageID)))
	case r.Status == FakeRejected:
		return sdk.Permanent(r.Error)
	default:
		return sdk.Transient(r.Status + ": " + r.Error)
	}
}

// post sends one request; a non-2xx answer is an error carrying its status.
func (s *batchSender) post(ctx context.Context, ms []sdk.Message) ([]batchResult, error) {
	type item struct {
		Key       string          `json:"key"`
		Recipient string          `json:"recipient"`
		Payload   json.RawMessage `json:"payload"`
	}
	items := make([]item, len(ms))
	for i, m := range ms {
		items[i] = item{strconv.FormatInt(m.ID, 10), m.Recipient, m.Payload}
	}
	body, err := json.Marshal(map[string]any{"messages": items})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer struct {
		Results []batchResult `json:"results"`
		Error   string        `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, fmt.Errorf("read the answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &statusError{resp.StatusCode, answer.Error}
	}
	return answer.Results, nil
}

type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.msg) }

func batchFeatures(fake *FakeBatchAPI) Features {
	return Features{
		Config:    json.RawMessage(`{"url":"` + fake.URL + `"}`),
		Invalid:   map[string]json.RawMessage{"missing url": json.RawMessage(`{}`)},
		Succeed:   sdk.Message{Recipient: "user-1", Payload: json.RawMessage(`{"text":"hi"}`)},
		Permanent: &sdk.Message{Recipient: RejectPrefix + "user-2", Payload: json.RawMessage(`{"text":"hi"}`)},
		BatchAPI:  fake,
		Batch:     16,
	}
}

// TestRun_BatchAPI: a BatchSender that matches results by key passes the
// whole suite against the shuffling fake, and every message it reported
// SENT was accepted by the fake, once.
func TestRun_BatchAPI(t *testing.T) {
	t.Parallel()
	fake := NewFakeBatchAPI(t)
	rep := Run(t, &batchPlugin{perRequest: 5}, batchFeatures(fake))
	accepted := fake.Accepted()
	for _, m := range rep.Sent {
		if n := accepted[strconv.FormatInt(m.ID, 10)]; n != 1 {
			t.Errorf("message %d reported SENT, accepted by the fake %d times", m.ID, n)
		}
	}
	if len(rep.Sent) == 0 {
		t.Error("the suite delivered nothing")
	}
}

// TestSuite_CatchesPositionMatching: a BatchSender that reads results by
// position fails the out-of-order check (and the mixed batch, whose
// Permanent goes through the fake too), whatever the seed and however it
// splits requests; matching by key passes both.
func TestSuite_CatchesPositionMatching(t *testing.T) {
	t.Parallel()
	for _, per := range []int{2, 5, 1000} {
		for _, byPosition := range []bool{false, true} {
			t.Run(fmt.Sprintf("per request %d/by position %v", per, byPosition), func(t *testing.T) {
				t.Parallel()
				fake := NewFakeBatchAPI(t)
				want := ""
				if byPosition {
					want = "Send/batch answered out of order,Send/mixed batch"
				}
				got := strings.Join(failing(t, &batchPlugin{byPosition: byPosition, perRequest: per}, batchFeatures(fake)), ",")
				if got != want {
					t.Errorf("failing checks: got %q, want %q", got, want)
				}
			})
		}
	}
}

// TestSuite_InOrderFakeHidesIt: the finding of issue 27 — against a fake
// that answers in the request's order, a position-matching BatchSender
// passes every check; with the fake in order the out-of-order check says
// it cannot run.
func TestSuite_InOrderFakeHidesIt(t *testing.T) {
	t.Parallel()
	fake := NewFakeBatchAPI(t)
	fake.InOrder(true)
	f := batchFeatures(fake)
	f.BatchAPI = nil
	if got := failing(t, &batchPlugin{byPosition: true, perRequest: 5}, f); len(got) != 0 {
		t.Errorf("in order, without BatchAPI: failing checks %q, want none (the hazard this kit guards against)", got)
	}
	f.BatchAPI = fake
	if got, want := strings.Join(failing(t, &batchPlugin{perRequest: 5}, f), ","), "Send/batch answered out of order"; got != want {
		t.Errorf("in order, as BatchAPI: failing checks %q, want %q", got, want)
	}
}

// TestSuite_BatchAPINotReached: a plugin that never sends to the fake (it
// refuses "reject:" recipients itself) is told to point its config at it.
func TestSuite_BatchAPINotReached(t *testing.T) {
	t.Parallel()
	fake := NewFakeBatchAPI(t)
	f := features()
	f.BatchAPI = fake
	f.Succeed.Recipient = "user-1"
	p := &fixture{name: "local", version: "1", seen: map[int64]bool{}, rejectPrefix: true}
	if got, want := strings.Join(failing(t, p, f), ","), "Send/batch answered out of order"; got != want {
		t.Errorf("failing checks: got %q, want %q", got, want)
	}
}

// post is a raw request to the fake.
func post(t *testing.T, url, body string) (int, map[string]json.RawMessage) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("answer is not JSON: %v", err)
	}
	return resp.StatusCode, out
}

func items(recipients ...string) string {
	var b strings.Builder
	b.WriteString(`{"messages":[`)
	for i, r := range recipients {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"key":"%d","recipient":%q,"payload":{}}`, i, r)
	}
	b.WriteString(`]}`)
	return b.String()
}

func results(t *testing.T, raw json.RawMessage) []batchResult {
	t.Helper()
	var rs []batchResult
	if err := json.Unmarshal(raw, &rs); err != nil {
		t.Fatalf("results: %v", err)
	}
	return rs
}

func TestFakeBatchAPI(t *testing.T) {
	t.Parallel()
	t.Run("answers each recipient by its prefix, never in order", func(t *testing.T) {
		fake := NewFakeBatchAPI(t)
		for range 50 {
			status, out := post(t, fake.URL, items("a", "reject:b", "retry:c", "omit:d", "e"))
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200", status)
			}
			rs := results(t, out["results"])
			want := map[string]string{"0": FakeAccepted, "1": FakeRejected, "2": FakeThrottled, "4": FakeAccepted}
			inOrder := len(rs) == 4
			for k, r := range rs {
				if want[r.Key] != r.Status {
					t.Fatalf("key %s: got %q, want %q (results %+v)", r.Key, r.Status, want[r.Key], rs)
				}
				delete(want, r.Key)
				inOrder = inOrder && r.Key == []string{"0", "1", "2", "4"}[k]
			}
			if len(want) > 0 || inOrder {
				t.Fatalf("results %+v: missing %v, or in the request's order", rs, want)
			}
		}
		if got := fake.Accepted(); len(got) != 2 || got["0"] != 50 || got["4"] != 50 {
			t.Errorf("Accepted: got %v, want keys 0 and 4 50 times each", got)
		}
	})
	t.Run("one status, two items: still out of order", func(t *testing.T) {
		fake := NewFakeBatchAPI(t)
		for range 20 {
			_, out := post(t, fake.URL, items("a", "b"))
			if rs := results(t, out["results"]); rs[0].Key != "1" {
				t.Fatalf("results %+v in the request's order", rs)
			}
		}
	})
	t.Run("the same seed, the same order", func(t *testing.T) {
		a, b := NewFakeBatchAPI(t), NewFakeBatchAPI(t)
		a.SetSeed(7)
		b.SetSeed(7)
		body := items("a", "b", "c", "d", "e", "f", "g", "h")
		for range 5 {
			_, x := post(t, a.URL, body)
			_, y := post(t, b.URL, body)
			if !bytes.Equal(x["results"], y["results"]) {
				t.Fatalf("seed 7 answered %s and %s", x["results"], y["results"])
			}
		}
	})
	t.Run("in order on request", func(t *testing.T) {
		fake := NewFakeBatchAPI(t)
		fake.InOrder(true)
		_, out := post(t, fake.URL, items("a", "reject:b", "c"))
		if rs := results(t, out["results"]); rs[0].Key != "0" || rs[1].Key != "1" || rs[2].Key != "2" {
			t.Errorf("InOrder: got %+v", rs)
		}
	})
	t.Run("request failures", func(t *testing.T) {
		fake := NewFakeBatchAPI(t)
		fake.SetMaxItems(3)
		fake.FailNext(2, http.StatusServiceUnavailable)
		for range 2 {
			if status, _ := post(t, fake.URL, items("a")); status != http.StatusServiceUnavailable {
				t.Errorf("FailNext: got %d, want 503", status)
			}
		}
		for _, tt := range []struct {
			body   string
			status int
			want   string
		}{
			{`{"messages":[{"recipient":"a"}]}`, 400, "has no key"},
			{`{"messages":[{"key":"1","recipient":"a"},{"key":"1","recipient":"b"}]}`, 400, `key "1" is in the request twice`},
			{`{"messages":[]}`, 400, "messages is empty"},
			{`{"msgs":[]}`, 400, `unknown field "msgs"`},
			{items("a", "b", "c", "d"), 413, "4 messages in one request; at most 3"},
			{items("a"), 200, ""},
		} {
			status, out := post(t, fake.URL, tt.body)
			var msg string
			_ = json.Unmarshal(out["error"], &msg)
			if status != tt.status || !strings.Contains(msg, tt.want) {
				t.Errorf("%s: got %d %q, want %d naming %q", tt.body, status, msg, tt.status, tt.want)
			}
		}
		if got := fake.Requests(); got != 8 {
			t.Errorf("Requests: got %d, want 8", got)
		}
		if got := fake.Items(); len(got) != 1 || got[0].Request != 8 || got[0].MessageID != "fake-1" {
			t.Errorf("Items: got %+v, want the one item of request 8", got)
		}
	})
	t.Run("a request failure is every message's verdict", func(t *testing.T) {
		fake := NewFakeBatchAPI(t)
		fake.FailNext(1, http.StatusServiceUnavailable)
		s := &batchSender{url: fake.URL, perRequest: 2}
		var ms []sdk.Message
		for i := range 4 {
			ms = append(ms, sdk.Message{ID: int64(i + 1), Recipient: "a", Payload: json.RawMessage(`{}`)})
		}
		vs := s.SendBatch(context.Background(), ms)
		want := []sdk.Outcome{sdk.OutcomeTransient, sdk.OutcomeTransient, sdk.OutcomeSuccess, sdk.OutcomeSuccess}
		for i, v := range vs {
			if v.Outcome != want[i] {
				t.Errorf("message %d: got %v %q, want %v", i+1, v.Outcome, v.Detail, want[i])
			}
		}
	})
}
