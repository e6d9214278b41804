package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
)

// nhnEditing is a front of f whose answers edit rewrites, as JSON objects:
// send answers (POST) and list pages (GET) whose JSON is an object.
func nhnEditing(t *testing.T, f *fakeNHN, edit func(post bool, a map[string]any)) *httptest.Server {
	t.Helper()
	return rewriting(t, f, func(r *http.Request, status int, body []byte) []byte {
		var a map[string]any
		if json.Unmarshal(body, &a) != nil {
			return body
		}
		edit(r.Method == http.MethodPost, a)
		out, err := json.Marshal(a)
		if err != nil {
			t.Errorf("re-encode the answer: %v", err)
			return body
		}
		return out
	})
}

// nhnEach calls set on each object of a's list at outer.inner (message.
// sendResults, messageSearchResultResponse.messages), with its index.
func nhnEach(a map[string]any, outer, inner string, set func(k int, e map[string]any)) {
	o, _ := a[outer].(map[string]any)
	list, _ := o[inner].([]any)
	for k, e := range list {
		if e, ok := e.(map[string]any); ok {
			set(k, e)
		}
	}
}

// nhnNotListedYet is a list page that shows nothing yet: the request NHN
// Cloud took is not in its list when the plugin looks.
const nhnNotListedYet = `{"header":{"isSuccessful":true,"resultCode":0,"resultMessage":"SUCCESS"},"messageSearchResultResponse":{"messages":[],"totalCount":0}}`

// TestNHN_AnswerFieldTypes: NHN Cloud accepted a request (isSuccessful,
// every recipient resultCode 0) but one field of its answer had another
// JSON type than documented: a resultCode "0", an isSuccessful "true", a
// recipientSeq "1" or past any int, a resultMessage object. The answer was
// decoded whole into typed fields, so the one field threw all of it away:
// "not its send result", reconciled, and with the list not showing the
// request yet every accepted message was retried — alone or regrouped it
// carries another idempotency key, and went out twice. Each field is now
// read whatever its type (kakaoCode, kakaoText, looseBool).
func TestNHN_AnswerFieldTypes(t *testing.T) {
	t.Parallel()
	header := func(field, value string) func(map[string]any) {
		return func(a map[string]any) {
			if h, ok := a["header"].(map[string]any); ok {
				h[field] = json.RawMessage(value)
			}
		}
	}
	message := func(field, value string) func(map[string]any) {
		return func(a map[string]any) {
			if m, ok := a["message"].(map[string]any); ok {
				m[field] = json.RawMessage(value)
			}
		}
	}
	entries := func(field string, value func(k int, old any) string) func(map[string]any) {
		return func(a map[string]any) {
			nhnEach(a, "message", "sendResults", func(k int, e map[string]any) { e[field] = json.RawMessage(value(k, e[field])) })
		}
	}
	same := func(v string) func(int, any) string { return func(int, any) string { return v } }
	for _, c := range []struct {
		name string
		edit func(map[string]any)
		seq  bool // each result still carries its recipientSeq
	}{
		{"header resultCode string", header("resultCode", `"0"`), true},
		{"header resultCode 0.0", header("resultCode", `0.0`), true},
		{"header resultCode past int64", header("resultCode", `1e30`), true},
		{"header isSuccessful string", header("isSuccessful", `"true"`), true},
		{"header resultMessage object", header("resultMessage", `{"ko":"성공"}`), true},
		{"requestId number", message("requestId", `20260101000000`), true},
		{"recipientSeq string", entries("recipientSeq", func(k int, _ any) string { return fmt.Sprintf(`"%d"`, k+1) }), true},
		{"recipientSeq past int64", entries("recipientSeq", same(`1e30`)), false},
		{"recipientSeq negative", entries("recipientSeq", same(`-1`)), false},
		{"recipientSeq object", entries("recipientSeq", same(`{"seq":1}`)), false},
		{"resultCode string", entries("resultCode", same(`"0"`)), true},
		{"resultCode 0.0", entries("resultCode", same(`0.0`)), true},
		{"resultMessage number", entries("resultMessage", same(`200`)), true},
		{"resultMessage array", entries("resultMessage", same(`["SUCCESS"]`)), true},
		{"recipientNo null", entries("recipientNo", same(`null`)), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeNHN(t)
			front := nhnEditing(t, f, func(post bool, a map[string]any) {
				if post {
					c.edit(a)
				}
			})
			f.ListScript = []nhnFakeAnswer{{Status: 200, Body: nhnNotListedYet}, {Status: 200, Body: nhnNotListedYet}}
			s, logs := nhnSetup(t, f, map[string]any{"confirm": "accepted", "api_url": front.URL})
			vs := s.SendBatch(t.Context(), quizMessages(3, phone))
			for i, v := range vs {
				if v.Outcome != sdk.OutcomeSuccess {
					t.Errorf("message %d: %v %q, want SENT: NHN Cloud accepted it (resultCode 0)", i, v.Outcome, v.Detail)
					continue
				}
				seq := fmt.Sprintf(`"recipient_seq":%d`, i+1)
				if c.seq != strings.Contains(string(v.Result), seq) {
					t.Errorf("message %d: result %s, want %s in it: %v", i, v.Result, seq, c.seq)
				}
			}
			if n := len(f.Sends()); n != 1 {
				t.Errorf("%d send requests, want 1", n)
			}
			nhnNoSecrets(t, logs, vs)
		})
	}
}

// TestNHN_AnswerFieldTypesRefused: a refusal whose resultCode is a string.
// It was thrown away with the rest of the answer: -1000 (invalid appkey,
// final) was retried to the end of the retry budget; -1005 (the key was
// used: the request went out before) lost its 10-minute look-back and its
// retry_after, so the message was retried at once into -1005 again until
// its budget ran out inside the key's window, dead-lettered, never sent.
func TestNHN_AnswerFieldTypesRefused(t *testing.T) {
	t.Parallel()
	t.Run("-1000", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		f.Script = []nhnFakeAnswer{{Status: 200, Body: `{"header":{"isSuccessful":"false","resultCode":"-1000","resultMessage":"Invalid appKey."}}`}}
		s, _ := nhnSetup(t, f, nil)
		for i, v := range s.SendBatch(t.Context(), quizMessages(2, phone)) {
			if v.Outcome != sdk.OutcomePermanent || v.ProviderCode != "-1000" || !strings.Contains(v.Detail, "alimtalk.app_key") {
				t.Errorf("message %d: %v %s %q, want PERMANENT -1000 naming alimtalk.app_key", i, v.Outcome, v.ProviderCode, v.Detail)
			}
		}
	})
	t.Run("-1005", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		f.Script = []nhnFakeAnswer{{Status: 200, Body: `{"header":{"isSuccessful":false,"resultCode":"-1005","resultMessage":"used"},"message":null}`}}
		f.ListScript = []nhnFakeAnswer{{Status: 200, Body: nhnNotListedYet}}
		s, _ := nhnSetup(t, f, nil)
		for i, v := range s.SendBatch(t.Context(), quizMessages(2, phone)) {
			if v.Outcome != sdk.OutcomeTransient || v.ProviderCode != "-1005" || v.RetryAfter < nhnKeyRetry {
				t.Errorf("message %d: %v %s retry after %v %q, want TRANSIENT -1005 after %v", i, v.Outcome, v.ProviderCode, v.RetryAfter, v.Detail, nhnKeyRetry)
			}
		}
	})
	t.Run("isSuccessful false, resultCode 0", func(t *testing.T) {
		// A header contradicting itself says nothing clear: the list
		// decides (here it shows the request), never a blind retry.
		t.Parallel()
		f := newFakeNHN(t)
		front := nhnEditing(t, f, func(post bool, a map[string]any) {
			if h, ok := a["header"].(map[string]any); ok && post {
				h["isSuccessful"] = json.RawMessage(`"N"`)
			}
		})
		s, _ := nhnSetup(t, f, map[string]any{"confirm": "accepted", "api_url": front.URL})
		for i, v := range s.SendBatch(t.Context(), quizMessages(2, phone)) {
			if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), "reconciled") {
				t.Errorf("message %d: %v %q %s, want SENT, reconciled", i, v.Outcome, v.Detail, v.Result)
			}
		}
		if n := len(f.Sends()); n != 1 {
			t.Errorf("%d send requests, want 1", n)
		}
	})
}

// TestNHN_ListFieldTypes: NHN Cloud took a request and its answer was lost
// (HTTP 500 after it), so the plugin reads the list by the request's key —
// but one field of the list page had another JSON type (a totalCount
// "3", a recipientSeq "1", an isSuccessful "true", a recipientGroupingKey
// number, one entry that is no object), or an entry had a null
// recipientSeq. The page was unreadable (or the entry skipped): nothing was
// credited, and every accepted message was retried — sent twice once
// regrouped or past the key's 10 minutes.
func TestNHN_ListFieldTypes(t *testing.T) {
	t.Parallel()
	page := func(field, value string) func(map[string]any) {
		return func(a map[string]any) {
			if b, ok := a["messageSearchResultResponse"].(map[string]any); ok {
				b[field] = json.RawMessage(value)
			}
		}
	}
	entries := func(field string, value func(old any) string) func(map[string]any) {
		return func(a map[string]any) {
			nhnEach(a, "messageSearchResultResponse", "messages", func(_ int, e map[string]any) { e[field] = json.RawMessage(value(e[field])) })
		}
	}
	same := func(v string) func(any) string { return func(any) string { return v } }
	quoted := func(old any) string { return fmt.Sprintf(`"%v"`, old) }
	unquoted := func(old any) string { return fmt.Sprint(old) }
	for _, c := range []struct {
		name string
		edit func(map[string]any)
	}{
		{"header isSuccessful string", func(a map[string]any) { a["header"].(map[string]any)["isSuccessful"] = "true" }},
		{"header resultCode string", func(a map[string]any) { a["header"].(map[string]any)["resultCode"] = "0" }},
		{"totalCount string", page("totalCount", `"3"`)},
		{"totalCount past int64", page("totalCount", `1e30`)},
		{"totalCount negative", page("totalCount", `-3`)},
		{"recipientSeq string", entries("recipientSeq", quoted)},
		{"recipientSeq null", entries("recipientSeq", same(`null`))},
		{"recipientSeq past int64", entries("recipientSeq", same(`1e30`))},
		{"recipientGroupingKey number", entries("recipientGroupingKey", unquoted)},
		{"requestId number", entries("requestId", same(`20260101000000`))},
		{"resultCodeName object", entries("resultCodeName", same(`{"ko":"성공"}`))},
		{"messageStatus number", entries("messageStatus", same(`1`))},
		{"an entry that is no object", func(a map[string]any) {
			if b, ok := a["messageSearchResultResponse"].(map[string]any); ok {
				list, _ := b["messages"].([]any)
				b["messages"] = append([]any{"junk"}, list...)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeNHN(t)
			front := nhnEditing(t, f, func(post bool, a map[string]any) {
				if !post {
					c.edit(a)
				}
			})
			f.AcceptThenFail = 1
			s, logs := nhnSetup(t, f, map[string]any{"confirm": "accepted", "api_url": front.URL})
			vs := s.SendBatch(t.Context(), quizMessages(3, phone))
			for i, v := range vs {
				if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), "listed by its idempotency key") {
					t.Errorf("message %d accepted, then answered 500: %v %q %s, want SENT, reconciled from the list", i, v.Outcome, v.Detail, v.Result)
				}
			}
			if n := len(f.Sends()); n != 1 {
				t.Errorf("%d send requests, want 1", n)
			}
			nhnNoSecrets(t, logs, vs)
		})
	}
}

// TestNHN_PollFieldTypes: the delivery poll (confirm: delivered) read a
// list page whose resultCode was a number (1000, 9999) or whose
// recipientSeq or totalCount was a string: the page was unreadable, every
// message was left "unconfirmed" SENT — a delivery Kakao failed
// transiently (9999) was never retried.
func TestNHN_PollFieldTypes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, field string }{
		{"resultCode number", "resultCode"},
		{"recipientSeq string", "recipientSeq"},
		{"totalCount string", "totalCount"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeNHN(t)
			f.Flaky["01000000001"] = true // Kakao's 9999: retried
			front := nhnEditing(t, f, func(post bool, a map[string]any) {
				if post {
					return
				}
				if c.field == "totalCount" {
					if b, ok := a["messageSearchResultResponse"].(map[string]any); ok {
						b["totalCount"] = fmt.Sprint(b["totalCount"])
					}
					return
				}
				nhnEach(a, "messageSearchResultResponse", "messages", func(_ int, e map[string]any) {
					switch v := e[c.field].(type) {
					case string:
						e[c.field] = json.RawMessage(v)
					case float64:
						e[c.field] = fmt.Sprint(v)
					}
				})
			})
			s, _ := nhnSetup(t, f, map[string]any{"confirm_wait": "2s", "api_url": front.URL})
			vs := s.SendBatch(t.Context(), quizMessages(3, phone))
			if v := vs[1]; v.Outcome != sdk.OutcomeTransient || v.ProviderCode != "9999" {
				t.Errorf("delivery failed with 9999: %v %s %q, want TRANSIENT 9999", v.Outcome, v.Result, v.Detail)
			}
			for _, i := range []int{0, 2} {
				if v := vs[i]; v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), `"delivery_result_code":"1000"`) {
					t.Errorf("message %d delivered: %v %s, want SENT with its delivery result", i, v.Outcome, v.Result)
				}
			}
		})
	}
}
