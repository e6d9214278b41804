package sdk_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"

	"github.com/notifyd/notifyd/sdk"
)

// bulkSMS is a Sender for an imaginary vendor that takes up to 100
// recipients per request and answers per recipient, in any order (the wire
// format of sdktest.FakeBatchAPI).
type bulkSMS struct {
	url    string
	client *http.Client
}

type bulkItem struct {
	Key       string          `json:"key"` // the message's ID, echoed in its result
	Recipient string          `json:"recipient"`
	Payload   json.RawMessage `json:"payload"`
}

type bulkResult struct {
	Key       string `json:"key"`
	Status    string `json:"status"` // accepted, rejected, throttled
	MessageID string `json:"message_id"`
	Error     string `json:"error"`
}

func (s *bulkSMS) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	return s.SendBatch(ctx, []sdk.Message{m})[0]
}

// SendBatch posts requests of at most 100 recipients and matches each
// result to its message by the key sent with it — never by position: the
// vendor may answer in another order, or leave a recipient out.
func (s *bulkSMS) SendBatch(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
	vs := make([]sdk.Verdict, len(ms))
	for start := 0; start < len(ms); start += 100 {
		group := ms[start:min(start+100, len(ms))]
		results, fail := s.post(ctx, group)
		byKey := make(map[string]bulkResult, len(results))
		for _, r := range results {
			byKey[r.Key] = r
		}
		for i, m := range group {
			r, ok := byKey[strconv.FormatInt(m.ID, 10)]
			switch {
			case fail != nil: // the request failed: every message in it
				vs[start+i] = *fail
			case !ok: // not accepted as far as we know: retried
				vs[start+i] = sdk.Transient("the vendor's answer has no result for this message")
			case r.Status == "accepted":
				vs[start+i] = sdk.Success(json.RawMessage(strconv.Quote(r.MessageID)))
			case r.Status == "rejected":
				vs[start+i] = sdk.Permanent(r.Error)
			default:
				vs[start+i] = sdk.Transient(r.Status + ": " + r.Error)
			}
		}
	}
	return vs
}

// post sends one request; fail is the verdict of all its messages when
// there is no per-recipient answer to read.
func (s *bulkSMS) post(ctx context.Context, ms []sdk.Message) (results []bulkResult, fail *sdk.Verdict) {
	failed := func(v sdk.Verdict) ([]bulkResult, *sdk.Verdict) { return nil, &v }
	items := make([]bulkItem, len(ms))
	for i, m := range ms {
		items[i] = bulkItem{Key: strconv.FormatInt(m.ID, 10), Recipient: m.Recipient, Payload: m.Payload}
	}
	body, err := json.Marshal(map[string]any{"messages": items})
	if err != nil {
		return failed(sdk.Permanent("encode the request: " + err.Error()))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return failed(sdk.Permanent("build the request: " + err.Error()))
	}
	resp, err := s.client.Do(req)
	if v := sdk.ClassifyHTTP(resp, err); v.Outcome != sdk.OutcomeSuccess {
		if resp != nil {
			resp.Body.Close()
		}
		return failed(v)
	}
	defer resp.Body.Close()
	var answer struct{ Results []bulkResult }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&answer); err != nil {
		// The request reached the vendor: retrying may send twice, never zero.
		return failed(sdk.Transient("read the answer: " + err.Error()))
	}
	return answer.Results, nil
}

// A BatchSender gets one verdict per message right even when the vendor
// answers in reverse order, because it matches results by key.
func ExampleBatchSender() {
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Messages []bulkItem }
		_ = json.NewDecoder(r.Body).Decode(&req)
		var rs []bulkResult
		for _, it := range req.Messages {
			if it.Recipient == "+820000000000" {
				rs = append(rs, bulkResult{Key: it.Key, Status: "rejected", Error: "unknown number"})
			} else {
				rs = append(rs, bulkResult{Key: it.Key, Status: "accepted", MessageID: "m-" + it.Key})
			}
		}
		slices.Reverse(rs)
		_ = json.NewEncoder(w).Encode(map[string]any{"results": rs})
	}))
	defer vendor.Close()

	var s sdk.BatchSender = &bulkSMS{url: vendor.URL, client: vendor.Client()}
	ms := []sdk.Message{
		{ID: 7, Recipient: "+821012345678", Payload: json.RawMessage(`{"text":"hi"}`)},
		{ID: 8, Recipient: "+820000000000", Payload: json.RawMessage(`{"text":"hi"}`)},
		{ID: 9, Recipient: "+821087654321", Payload: json.RawMessage(`{"text":"hi"}`)},
	}
	for i, v := range s.SendBatch(context.Background(), ms) {
		fmt.Println(ms[i].ID, v.Outcome, cmp.Or(string(v.Result), v.Detail))
	}
	// Output:
	// 7 SUCCESS "m-7"
	// 8 PERMANENT unknown number
	// 9 SUCCESS "m-9"
}
