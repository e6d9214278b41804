package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/notifyd/notifyd/sdk"
)

// TestSENS_ReconcilePastListBound: a SENS send whose answer is lost (503) is
// reconciled by reading the result list by channel, template and minute —
// every request of that template then, a daily send's 10,000 at once. The
// lookup stops after sensListPages pages; a message not found by then was
// TRANSIENT, as if never sent, though the list went on: it may have been on
// the next page, and the retry sent it twice. Past the bound its fate is
// not known: SENT, "delivery":"unconfirmed", never sent again. A list read
// to its end without it still has it retried.
func TestSENS_ReconcilePastListBound(t *testing.T) {
	t.Parallel()
	for _, endless := range []bool{true, false} {
		t.Run(fmt.Sprintf("list goes on %v", endless), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			posts, gets := 0, 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if r.Method == http.MethodPost {
					posts++
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = w.Write([]byte(`{"error":{"errorCode":"500","message":"Endpoint Error"}}`))
					return
				}
				gets++
				var items []map[string]any
				for k := range 100 {
					items = append(items, map[string]any{"messageId": fmt.Sprintf("other-%d-%d", gets, k), "requestId": "other",
						"to": fmt.Sprintf("0109999%04d", k), "content": "someone else's", "requestStatusCode": "A000"})
				}
				next := "t" + strconv.Itoa(gets)
				if !endless && gets == 3 {
					next = ""
				}
				_ = json.NewEncoder(w).Encode(map[string]any{"statusCode": "200", "messages": items, "nextToken": next})
			}))
			t.Cleanup(srv.Close)
			f := newFakeSENS(t)
			s, _ := atSetup(t, f, map[string]any{"api_url": srv.URL, "confirm": "accepted"}, quizTemplate)
			vs := s.SendBatch(t.Context(), quizMessages(2, phone))
			for i, v := range vs {
				switch {
				case endless && (v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), `"delivery":"unconfirmed"`)):
					t.Errorf("message %d: %v %q %s, want SENT unconfirmed: the list went on past what was read, so it may have been sent", i, v.Outcome, v.Detail, v.Result)
				case !endless && v.Outcome != sdk.OutcomeTransient:
					t.Errorf("message %d: %v %q, want TRANSIENT: the list was read to its end without it", i, v.Outcome, v.Detail)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if posts != 1 || (endless && gets != sensListPages) || (!endless && gets != 3) {
				t.Errorf("%d sends and %d list pages, want 1 and %d", posts, gets, map[bool]int{true: sensListPages, false: 3}[endless])
			}
		})
	}
}

// TestNHN_ReconcileListPages: NHN Cloud's list by the request's key, read
// after a lost answer. A page without totalCount ended the lookup after its
// first page (page×200 ≥ 0), so the request's messages on later pages were
// retried — with another key once regrouped: sent twice. And a list that
// goes on past the pages read left its unfound messages TRANSIENT, as if
// never sent; their fate is not known: SENT, unconfirmed.
func TestNHN_ReconcileListPages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		n        int
		total    int // totalCount; 0 = left out
		extra    int // entries of an earlier request with the same key, listed first
		wantSENT int // credited from the list
		unknown  bool
	}{
		{name: "no totalCount", n: 300, wantSENT: 300},
		{name: "past the pages read", n: 10, total: 100000, extra: 100000, unknown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			key := ""
			var ids []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if r.Method == http.MethodPost {
					key = r.Header.Get("X-NC-API-IDEMPOTENCY-KEY")
					var body struct {
						RecipientList []struct {
							RecipientGroupingKey string `json:"recipientGroupingKey"`
						} `json:"recipientList"`
					}
					_ = json.NewDecoder(r.Body).Decode(&body)
					for _, rc := range body.RecipientList {
						ids = append(ids, rc.RecipientGroupingKey)
					}
					w.WriteHeader(http.StatusInternalServerError)
					_, _ = w.Write([]byte(`<html>oops</html>`))
					return
				}
				page, _ := strconv.Atoi(r.URL.Query().Get("pageNum"))
				size, _ := strconv.Atoi(r.URL.Query().Get("pageSize"))
				var msgs []map[string]any
				for k := (page - 1) * size; k < page*size && k < tc.extra+len(ids); k++ {
					m := map[string]any{"requestId": "req-1", "senderGroupingKey": key, "recipientSeq": k + 1, "messageStatus": "COMPLETED", "resultCode": "1000"}
					if k < tc.extra {
						m["recipientGroupingKey"] = "earlier-" + strconv.Itoa(k)
					} else {
						m["recipientGroupingKey"] = ids[k-tc.extra]
					}
					msgs = append(msgs, m)
				}
				list := map[string]any{"messages": msgs}
				if tc.total > 0 {
					list["totalCount"] = tc.total
				}
				_ = json.NewEncoder(w).Encode(map[string]any{"header": nhnHeaderJSON(true, 0, "SUCCESS"), "messageSearchResultResponse": list})
			}))
			t.Cleanup(srv.Close)
			f := newFakeNHN(t)
			s, _ := nhnSetup(t, f, map[string]any{"api_url": srv.URL, "confirm": "accepted"})
			vs := s.SendBatch(t.Context(), quizMessages(tc.n, phone))
			sent, unconfirmed := 0, 0
			for _, v := range vs {
				if v.Outcome == sdk.OutcomeSuccess {
					if strings.Contains(string(v.Result), "reconciled") && strings.Contains(string(v.Result), "listed") {
						sent++
					} else if strings.Contains(string(v.Result), `"delivery":"unconfirmed"`) {
						unconfirmed++
					}
				}
			}
			if tc.unknown && unconfirmed != tc.n {
				t.Errorf("%d of %d SENT unconfirmed, want all: the list goes on past the pages read (first: %v %q)", unconfirmed, tc.n, vs[0].Outcome, vs[0].Detail)
			}
			if !tc.unknown && sent != tc.wantSENT {
				t.Errorf("%d of %d credited from the list, want %d (first unlisted: %v)", sent, tc.n, tc.wantSENT, firstNot(vs))
			}
		})
	}
}

func firstNot(vs []sdk.Verdict) string {
	for _, v := range vs {
		if v.Outcome != sdk.OutcomeSuccess {
			return fmt.Sprintf("%v %q", v.Outcome, v.Detail)
		}
	}
	return "none"
}
