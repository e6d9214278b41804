package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: want %q is not JSON: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

func formKeys(r recordedRequest) []string {
	var keys []string
	for k := range r.Form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkSendRequest asserts the exact request Kakao's docs ask for.
func checkSendRequest(t *testing.T, r recordedRequest, path, token string) {
	t.Helper()
	if r.Method != http.MethodPost || r.Path != path {
		t.Errorf("request = %s %s, want POST %s", r.Method, r.Path, path)
	}
	if got, want := r.Header.Get("Authorization"), "Bearer "+token; got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
	if got, want := r.Header.Get("Content-Type"), "application/x-www-form-urlencoded;charset=utf-8"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
}

func TestSender_Send_Memo(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	v := b.send(b.sender, "", textPayload)
	wantVerdict(t, v, sdk.OutcomeSuccess, 200, "")
	jsonEqual(t, "result", string(v.Result), `{"result_code":0}`)

	reqs := b.fake.sendRequests()
	if len(reqs) != 1 {
		t.Fatalf("sends = %d, want 1", len(reqs))
	}
	checkSendRequest(t, reqs[0], "/v2/api/talk/memo/default/send", testAccess)
	if got, want := formKeys(reqs[0]), []string{"template_object"}; !reflect.DeepEqual(got, want) {
		t.Errorf("form keys = %v, want %v", got, want)
	}
	jsonEqual(t, "template_object", reqs[0].Form.Get("template_object"), textPayload)
	if n := len(b.fake.tokenRequests()); n != 0 {
		t.Errorf("token requests = %d, want 0", n)
	}
}

func TestSender_Send_Friends(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]any{"mode": "friends"})
	v := b.send(b.sender, testUUID, textPayload)
	wantVerdict(t, v, sdk.OutcomeSuccess, 200, "")
	jsonEqual(t, "result", string(v.Result), `{"successful_receiver_uuids":["`+testUUID+`"]}`)

	reqs := b.fake.sendRequests()
	if len(reqs) != 1 {
		t.Fatalf("sends = %d, want 1", len(reqs))
	}
	checkSendRequest(t, reqs[0], "/v1/api/talk/friends/message/default/send", testAccess)
	if got, want := formKeys(reqs[0]), []string{"receiver_uuids", "template_object"}; !reflect.DeepEqual(got, want) {
		t.Errorf("form keys = %v, want %v", got, want)
	}
	if got, want := reqs[0].Form.Get("receiver_uuids"), `["`+testUUID+`"]`; got != want {
		t.Errorf("receiver_uuids = %s, want %s", got, want)
	}
	jsonEqual(t, "template_object", reqs[0].Form.Get("template_object"), textPayload)

	t.Run("no recipient", func(t *testing.T) {
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomePermanent, 0, "")
		if !strings.Contains(v.Detail, "recipient") {
			t.Errorf("detail = %q, want it to mention the recipient", v.Detail)
		}
	})
}

func TestSender_Send_Template(t *testing.T) {
	t.Parallel()
	tmpl := map[string]any{
		"object_type":  "text",
		"text":         `Order {{.order_id}} for {{.name}} shipped`,
		"link":         map[string]any{"web_url": "https://shop.example/o/{{.order_id}}"},
		"button_title": "Track",
	}
	b := setup(t, map[string]any{"mode": "friends", "template": tmpl})
	v := b.send(b.sender, testUUID, `{"order_id": 1234567890123, "name": "Kim \"Q\" <&>"}`)
	wantVerdict(t, v, sdk.OutcomeSuccess, 200, "")
	reqs := b.fake.sendRequests()
	if len(reqs) != 1 {
		t.Fatalf("sends = %d, want 1", len(reqs))
	}
	jsonEqual(t, "template_object", reqs[0].Form.Get("template_object"),
		`{"object_type":"text","text":"Order 1234567890123 for Kim \"Q\" <&> shipped","link":{"web_url":"https://shop.example/o/1234567890123"},"button_title":"Track"}`)

	t.Run("missing payload field", func(t *testing.T) {
		v := b.send(b.sender, testUUID, `{"name":"Kim"}`)
		wantVerdict(t, v, sdk.OutcomePermanent, 0, "")
		if !strings.Contains(v.Detail, "order_id") {
			t.Errorf("detail = %q, want it to name order_id", v.Detail)
		}
	})
	if n := len(b.fake.sendRequests()); n != 1 {
		t.Errorf("sends = %d, want 1 (a bad payload is never sent)", n)
	}
}

func TestSender_Send_BadPayload(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, payload := range []string{``, `null`, `"text"`, `[1]`, `{"text":"no object_type"}`, `{"object_type":""}`, `{not json`} {
		v := b.send(b.sender, "", payload)
		wantVerdict(t, v, sdk.OutcomePermanent, 0, "")
		if !strings.Contains(v.Detail, "template object") && !strings.Contains(v.Detail, "object_type") {
			t.Errorf("payload %q: detail = %q, want it to explain the template object", payload, v.Detail)
		}
	}
	if n := len(b.fake.sendRequests()); n != 0 {
		t.Errorf("sends = %d, want 0", n)
	}
}

// TestSender_Send_ErrorCodes walks Kakao's documented error answers.
func TestSender_Send_ErrorCodes(t *testing.T) {
	t.Parallel()
	daily := 30 * time.Minute                   // 23:30 KST → midnight KST
	monthly := 21*24*time.Hour + 30*time.Minute // 2025-03-10 23:30 KST → 04-01 00:00 KST
	tests := []struct {
		name      string
		status    int
		body      string
		outcome   sdk.Outcome
		code      string
		retry     time.Duration
		reasonSub string
	}{
		{"-1 internal error", 400, `{"msg":"internal error","code":-1}`, sdk.OutcomeTransient, "-1", 0, "internal error"},
		{"-7 maintenance", 400, `{"msg":"under maintenance","code":-7}`, sdk.OutcomeTransient, "-7", 0, "maintenance"},
		{"-603 internal timeout", 400, `{"msg":"timeout","code":-603}`, sdk.OutcomeTransient, "-603", 0, "timeout"},
		{"-9798 maintenance 503", 503, `{"msg":"service check","code":-9798}`, sdk.OutcomeTransient, "-9798", 0, "maintenance"},
		{"-10 quota", 400, `{"msg":"API limit has been exceeded.","code":-10}`, sdk.OutcomeTransient, "-10", daily, "quota"},
		{"-11 paid limit: retried after the daily reset", 400, `{"msg":"paid API limit exceeded","code":-11}`, sdk.OutcomeTransient, "-11", daily, "daily or monthly spending limit"},
		{"-532 sender daily", 400, `{"msg":"daily limit exceeded","code":-532}`, sdk.OutcomeTransient, "-532", daily, "sender's daily"},
		{"-533 recipient daily", 400, `{"msg":"daily limit exceeded","code":-533}`, sdk.OutcomeTransient, "-533", daily, "recipient's daily"},
		{"-536 pair daily", 400, `{"msg":"daily limit exceeded","code":-536}`, sdk.OutcomeTransient, "-536", daily, "pair"},
		{"-531 sender monthly", 400, `{"msg":"monthly limit exceeded","code":-531}`, sdk.OutcomeTransient, "-531", monthly, "monthly"},
		{"-402 consent", 403, `{"msg":"insufficient scopes.","code":-402,"api_type":"TALK_MEMO_DEFAULT_SEND","required_scopes":["talk_message"]}`, sdk.OutcomePermanent, "-402", 0, "consent"},
		{"-3 app config", 403, `{"msg":"App disabled [talk_message] scopes","code":-3}`, sdk.OutcomePermanent, "-3", 0, "app configuration"},
		{"-5 app permission", 403, `{"msg":"no permission","code":-5}`, sdk.OutcomePermanent, "-5", 0, "app configuration"},
		// Kakao's REST API error codes: -502 "Retry to make a request after
		// cached data expires" (a friendship newer than Kakao's cache).
		{"-502 not a friend (yet)", 400, `{"msg":"not a friend","code":-502}`, sdk.OutcomeTransient, "-502", 0, "retried"},
		{"-530 refuses messages", 400, `{"msg":"user refused to receive messages","code":-530}`, sdk.OutcomePermanent, "-530", 0, "refuses"},
		{"-2 bad params", 400, `{"msg":"template_object is invalid","code":-2}`, sdk.OutcomePermanent, "-2", 0, "template_object is invalid"},
		{"unknown code on 400 (Kakao's temporary faults come as 400 too)", 400, `{"msg":"something new","code":-12345}`, sdk.OutcomeTransient, "-12345", 0, "does not know: retried"},
		{"unknown code on another 4xx", 403, `{"msg":"something new","code":-12345}`, sdk.OutcomePermanent, "-12345", 0, "something new"},
		{"unknown 5xx code", 500, `{"msg":"oops","code":-12345}`, sdk.OutcomeTransient, "-12345", 0, "oops"},
		{"500 garbage", 500, `<html>Internal Server Error</html>`, sdk.OutcomeTransient, "", 0, "HTTP 500"},
		{"502 empty", 502, ``, sdk.OutcomeTransient, "", 0, "HTTP 502"},
		{"404 garbage", 404, `<html>not found</html>`, sdk.OutcomePermanent, "", 0, "HTTP 404"},
		// A quoted code is read as the code it holds (it was a bare 400,
		// final, though -1 is Kakao's temporary fault): TestSender_Send_ErrorBodyFieldTypes.
		{"400 code quoted", 400, `{"msg":"x","code":"-1"}`, sdk.OutcomeTransient, "-1", 0, "internal error"},
		{"200 garbage", 200, `<html>captive portal</html>`, sdk.OutcomeTransient, "", 0, "unreadable"},
		{"200 empty", 200, ``, sdk.OutcomeTransient, "", 0, "unreadable"},
		{"200 result_code non-zero", 200, `{"result_code":7}`, sdk.OutcomePermanent, "", 0, "result_code 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.fake.answer(tt.status, tt.body)
			v := b.send(b.sender, "", textPayload)
			wantVerdict(t, v, tt.outcome, tt.status, tt.code)
			if v.RetryAfter != tt.retry {
				t.Errorf("retry after = %v, want %v", v.RetryAfter, tt.retry)
			}
			if !strings.Contains(v.Detail, tt.reasonSub) {
				t.Errorf("detail = %q, want it to contain %q", v.Detail, tt.reasonSub)
			}
			if n := len(b.fake.tokenRequests()); n != 0 {
				t.Errorf("token refreshes = %d, want 0", n)
			}
		})
	}
}

func TestSender_Send_RetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fake.answerWith(cannedAnswer{status: 429, header: http.Header{"Retry-After": {"7"}}, body: `Too Many Requests`})
	v := b.send(b.sender, "", textPayload)
	wantVerdict(t, v, sdk.OutcomeTransient, 429, "")
	if v.RetryAfter != 7*time.Second {
		t.Errorf("retry after = %v, want 7s", v.RetryAfter)
	}
}

func TestSender_Send_FailureInfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		outcome sdk.Outcome
		code    string
		retry   time.Duration
	}{
		{"refuses messages", `{"successful_receiver_uuids":[],"failure_info":[{"code":-530,"msg":"user refused to receive messages","receiver_uuids":["` + testUUID + `"]}]}`,
			sdk.OutcomePermanent, "-530", 0},
		{"pair quota", `{"failure_info":[{"code":-536,"msg":"daily limit exceeded","receiver_uuids":["` + testUUID + `"]}]}`,
			sdk.OutcomeTransient, "-536", 30 * time.Minute},
		{"failure_infos spelling", `{"failure_infos":[{"code":-533,"msg":"daily limit exceeded","receiver_uuids":["` + testUUID + `"]}]}`,
			sdk.OutcomeTransient, "-533", 30 * time.Minute},
		{"failure without uuids", `{"failure_info":[{"code":-502,"msg":"not a friend"}]}`,
			sdk.OutcomeTransient, "-502", 0},
		{"other receiver failed", `{"successful_receiver_uuids":["` + testUUID + `"],"failure_info":[{"code":-530,"msg":"refused","receiver_uuids":["someone-else"]}]}`,
			sdk.OutcomeSuccess, "", 0},
		{"recipient not confirmed", `{"successful_receiver_uuids":["someone-else"]}`,
			sdk.OutcomeTransient, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, map[string]any{"mode": "friends"})
			b.fake.answer(200, tt.body)
			v := b.send(b.sender, testUUID, textPayload)
			wantVerdict(t, v, tt.outcome, 200, tt.code)
			if v.RetryAfter != tt.retry {
				t.Errorf("retry after = %v, want %v", v.RetryAfter, tt.retry)
			}
			if tt.outcome != sdk.OutcomeSuccess && tt.code != "" && !strings.Contains(v.Detail, "failure_info") {
				t.Errorf("detail = %q, want it to say the failure came in failure_info", v.Detail)
			}
			jsonEqual(t, "result", string(v.Result), tt.body)
		})
	}
}

// TestSender_Send_ErrorCodeIn2xx: a 2xx whose body is Kakao's error object
// ({"msg","code"}, none of a send result's fields) is judged by its code,
// as under an error status. It was taken for a send result and reported
// SUCCESS: a -1 or a -532 answered 200 lost the message.
func TestSender_Send_ErrorCodeIn2xx(t *testing.T) {
	t.Parallel()
	t.Run("memo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.fake.answer(200, `{"msg":"internal error","code":-1}`)
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomeTransient, 200, "-1")
	})
	t.Run("friends", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]any{"mode": "friends"})
		b.fake.answer(200, `{"msg":"daily limit exceeded","code":-532}`)
		v := b.send(b.sender, testUUID, textPayload)
		wantVerdict(t, v, sdk.OutcomeTransient, 200, "-532")
		if v.RetryAfter != 30*time.Minute {
			t.Errorf("retry after = %v, want 30m (the daily reset)", v.RetryAfter)
		}
	})
	t.Run("-401 refreshes the token", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.fake.answer(200, `{"msg":"this access token does not exist","code":-401}`)
		v := b.send(b.sender, "", textPayload)
		wantVerdict(t, v, sdk.OutcomeSuccess, 200, "")
		if s, r := len(b.fake.sendRequests()), len(b.fake.tokenRequests()); s != 2 || r != 1 {
			t.Errorf("sends = %d, refreshes = %d, want 2 and 1", s, r)
		}
	})
}

// TestSender_Send_UnknownCodeIn2xx: Kakao answers a failure of a
// request of one receiver with an error code (HTTP 400 for its temporary
// faults too), and the same failure in a request of several with HTTP 200
// and failure_info. An unknown code is retried in the first case; it was
// final in the second (classifyCode judged it by the envelope's 200), so a
// new temporary code killed the messages of batched requests.
func TestSender_Send_UnknownCodeIn2xx(t *testing.T) {
	t.Parallel()
	t.Run("failure_info", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]any{"mode": "friends"})
		bs := b.sender.(sdk.BatchSender)
		b.fake.answer(200, `{"successful_receiver_uuids":["friend-a"],"failure_info":[{"code":-9001,"msg":"temporarily unavailable","receiver_uuids":["friend-b"]}]}`)
		ms := []sdk.Message{
			{ID: 1, Recipient: "friend-a", Payload: json.RawMessage(textPayload), Attempt: 1},
			{ID: 2, Recipient: "friend-b", Payload: json.RawMessage(textPayload), Attempt: 1},
		}
		vs := bs.SendBatch(t.Context(), ms)
		if vs[0].Outcome != sdk.OutcomeSuccess {
			t.Errorf("friend-a: %v %q, want SUCCESS", vs[0].Outcome, vs[0].Detail)
		}
		// Alone, the same unknown code answered HTTP 400 is TRANSIENT
		// (TestSender_Send_ErrorCodes).
		wantVerdict(t, vs[1], sdk.OutcomeTransient, 200, "-9001")
		if !strings.Contains(vs[1].Detail, "failure_info") {
			t.Errorf("detail = %q, want it to say the failure came in failure_info", vs[1].Detail)
		}
	})
	t.Run("error object under a 200", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.fake.answer(200, `{"msg":"something new","code":-9001}`)
		wantVerdict(t, b.send(b.sender, "", textPayload), sdk.OutcomeTransient, 200, "-9001")
	})
}

// TestSender_Send_OversizedAnswer: an answer over maxBody is not read. post
// read its first maxBody bytes and decided on them: a -1 whose body passed
// 1 MiB lost its code and, as a bare 400, was final.
func TestSender_Send_OversizedAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fake.answer(400, `{"msg":"`+strings.Repeat("x", maxBody)+`","code":-1}`)
	v := b.send(b.sender, "", textPayload)
	wantVerdict(t, v, sdk.OutcomeTransient, 400, "")
	if want := fmt.Sprintf("over %d bytes", maxBody); !strings.Contains(v.Detail, want) || len(v.Detail) > 200 {
		t.Errorf("detail = %.200q, want it to say the answer is %s, briefly", v.Detail, want)
	}
}

func TestSender_Send_Network(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fake.api.Close()
	v := b.send(b.sender, "", textPayload)
	wantVerdict(t, v, sdk.OutcomeTransient, 0, "")
	if !strings.Contains(v.Detail, "send to Kakao") {
		t.Errorf("detail = %q, want a transport error", v.Detail)
	}
}

func TestSender_Send_Redirect(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fake.answerWith(cannedAnswer{status: 302, header: http.Header{"Location": {"http://127.0.0.1:1/elsewhere"}}, body: `{}`})
	v := b.send(b.sender, "", textPayload)
	wantVerdict(t, v, sdk.OutcomePermanent, 302, "")
	if n := len(b.fake.sendRequests()); n != 1 {
		t.Errorf("sends = %d, want 1 (redirects are not followed)", n)
	}
}

// TestFriends_SendBatch: a batch of one template object goes out in requests
// of at most 5 distinct receiver_uuids; a refused friend fails alone, a
// repeated recipient never shares a request with itself, and a failed request
// is each of its recipients' verdict.
func TestFriends_SendBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]any{"mode": "friends"})
	bs, ok := b.sender.(sdk.BatchSender)
	if !ok {
		t.Fatalf("a friends sender is %T, not an sdk.BatchSender", b.sender)
	}
	b.fake.set(func(f *fakeKakao) { f.refuse = map[string]int{"friend-3": -530} })
	var ms []sdk.Message
	for i := range 11 {
		ms = append(ms, sdk.Message{ID: int64(i + 1), Recipient: fmt.Sprintf("friend-%d", i%10), Payload: json.RawMessage(textPayload)})
	}
	ms = append(ms,
		sdk.Message{ID: 12, Recipient: "friend-x", Payload: json.RawMessage(`{"object_type":"text","text":"another text","link":{}}`)},
		sdk.Message{ID: 13, Recipient: "", Payload: json.RawMessage(textPayload)},
		sdk.Message{ID: 14, Recipient: "friend-y", Payload: json.RawMessage(`{"no":"object_type"}`)},
	)
	vs := bs.SendBatch(t.Context(), ms)
	if len(vs) != len(ms) {
		t.Fatalf("got %d verdicts for %d messages", len(vs), len(ms))
	}
	for i, v := range vs {
		want := sdk.OutcomeSuccess
		if ms[i].Recipient == "friend-3" || ms[i].ID >= 13 {
			want = sdk.OutcomePermanent
		}
		if v.Outcome != want {
			t.Errorf("message %d (%q): got %v %q, want %v", ms[i].ID, ms[i].Recipient, v.Outcome, v.Detail, want)
		}
		if want == sdk.OutcomeSuccess && string(v.Result) != `{"successful_receiver_uuids":["`+ms[i].Recipient+`"]}` {
			t.Errorf("message %d: result %s, want only its own receiver", ms[i].ID, v.Result)
		}
	}
	if v := vs[3]; v.ProviderCode != "-530" {
		t.Errorf("refused friend: code %q, want -530", v.ProviderCode)
	}
	reqs := b.fake.sendRequests()
	// 11 messages of one object (friend-0 twice) → 5 + 5 + 1; the other
	// object → 1.
	var sizes []int
	for _, r := range reqs {
		var uuids []string
		if err := json.Unmarshal([]byte(r.Form.Get("receiver_uuids")), &uuids); err != nil {
			t.Fatalf("receiver_uuids %q: %v", r.Form.Get("receiver_uuids"), err)
		}
		seen := map[string]bool{}
		for _, u := range uuids {
			if seen[u] {
				t.Errorf("request %v carries %s twice", uuids, u)
			}
			seen[u] = true
		}
		sizes = append(sizes, len(uuids))
	}
	sort.Ints(sizes)
	if fmt.Sprint(sizes) != "[1 1 5 5]" {
		t.Errorf("request sizes %v, want [1 1 5 5]", sizes)
	}

	// A failed request: every recipient in it gets its verdict.
	b.fake.answer(http.StatusServiceUnavailable, `{"msg":"system under maintenance","code":-7}`)
	vs = bs.SendBatch(t.Context(), ms[:5])
	for i, v := range vs {
		if v.Outcome != sdk.OutcomeTransient || v.ProviderCode != "-7" {
			t.Errorf("message %d after a -7 answer: got %v %q code %q, want TRANSIENT -7", i+1, v.Outcome, v.Detail, v.ProviderCode)
		}
	}
}

// TestSender_Send_SpendingLimit: -11 is the daily or the monthly spending
// limit. The first is retried after the next 00:00 KST; a -11 after that
// reset is final; a success in between forgets it.
func TestSender_Send_SpendingLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]any{"mode": "friends"})
	limit := `{"msg":"paid API limit exceeded","code":-11}`
	b.fake.answer(400, limit)
	v := b.send(b.sender, testUUID, textPayload)
	wantVerdict(t, v, sdk.OutcomeTransient, 400, "-11")
	if v.RetryAfter != 30*time.Minute { // 23:30 KST → 00:00 KST
		t.Errorf("first -11: retry after %v, want 30m (the next 00:00 KST)", v.RetryAfter)
	}
	b.clock.Advance(10 * time.Minute)
	b.fake.answer(400, limit)
	if v := b.send(b.sender, testUUID, textPayload); v.Outcome != sdk.OutcomeTransient || v.RetryAfter != 20*time.Minute {
		t.Errorf("-11 before the reset: got %v after %v, want TRANSIENT after 20m", v.Outcome, v.RetryAfter)
	}
	b.clock.Advance(21 * time.Minute) // 00:01 KST: the reset has passed
	b.fake.answer(400, limit)
	v = b.send(b.sender, testUUID, textPayload)
	wantVerdict(t, v, sdk.OutcomePermanent, 400, "-11")
	if v.RetryAfter != 0 || !strings.Contains(v.Detail, "outlasted") {
		t.Errorf("-11 after the reset: retry after %v, detail %q; want final, saying the limit outlasted the reset", v.RetryAfter, v.Detail)
	}
	// The limit is raised: a send goes through, and a later -11 is a new
	// day's limit again.
	if v := b.send(b.sender, testUUID, textPayload); v.Outcome != sdk.OutcomeSuccess {
		t.Fatalf("send after the limit was raised: %v %q", v.Outcome, v.Detail)
	}
	b.fake.answer(400, limit)
	if v := b.send(b.sender, testUUID, textPayload); v.Outcome != sdk.OutcomeTransient || v.RetryAfter != 23*time.Hour+59*time.Minute {
		t.Errorf("-11 after a success: got %v after %v, want TRANSIENT until the next 00:00 KST", v.Outcome, v.RetryAfter)
	}
}

// TestFriends_SendBatch_Isolate: Kakao refuses a request of 5 receivers
// with -2 ("not allowed to send to some of the receivers") because of one:
// each is sent again alone, only that one fails, the 4 others are sent
// once each.
func TestFriends_SendBatch_Isolate(t *testing.T) {
	t.Parallel()
	for _, code := range []int{-2, -502, -530} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			b := setup(t, map[string]any{"mode": "friends"})
			bs := b.sender.(sdk.BatchSender)
			b.fake.set(func(f *fakeKakao) { f.refuseRequest = map[string]int{"friend-2": code} })
			var ms []sdk.Message
			for i := range 5 {
				ms = append(ms, sdk.Message{ID: int64(i + 1), Recipient: fmt.Sprintf("friend-%d", i), Payload: json.RawMessage(textPayload), Attempt: 1})
			}
			vs := bs.SendBatch(t.Context(), ms)
			for i, v := range vs {
				want := sdk.OutcomeSuccess
				if ms[i].Recipient == "friend-2" {
					want = sdk.OutcomePermanent
					if code == -502 {
						want = sdk.OutcomeTransient // not a friend yet: retried
					}
				}
				if v.Outcome != want {
					t.Errorf("%s: got %v %q, want %v", ms[i].Recipient, v.Outcome, v.Detail, want)
				}
			}
			if v := vs[2]; v.ProviderCode != strconv.Itoa(code) || !strings.Contains(v.Detail, "sent alone") {
				t.Errorf("the receiver at fault: code %q detail %q, want %d, sent alone", v.ProviderCode, v.Detail, code)
			}
			// Kakao sent the refused request to no one; each receiver went
			// out in exactly one accepted request.
			accepted := map[string]int{}
			for _, r := range b.fake.sendRequests() {
				var uuids []string
				_ = json.Unmarshal([]byte(r.Form.Get("receiver_uuids")), &uuids)
				if len(uuids) == 1 && uuids[0] != "friend-2" {
					accepted[uuids[0]]++
				}
			}
			for i := range 5 {
				if u := fmt.Sprintf("friend-%d", i); u != "friend-2" && accepted[u] != 1 {
					t.Errorf("%s was sent in %d accepted requests, want 1", u, accepted[u])
				}
			}
			if n := len(b.fake.sendRequests()); n != 6 {
				t.Errorf("%d requests, want 6 (the refused one, then each receiver alone)", n)
			}
		})
	}
}

// TestSender_Send_ErrorBodyFieldTypes: Kakao's error object and send result
// with a field of another JSON type than documented (a code as a string or
// 1.0-style number, a msg that is an object or a number, a huge code). The
// whole body was thrown away for one field: a -1 under a 400 lost its code
// and was final (a bare 400), the same error object under a 200 was SUCCESS
// (the message lost), and a friends answer whose failure_info had a quoted
// code made every receiver TRANSIENT, the ones Kakao had delivered to
// included (sent twice). Each field is read for what it holds now; a code
// that is no integer is a code this plugin does not know.
func TestSender_Send_ErrorBodyFieldTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
		outcome    sdk.Outcome
		code       string
	}{
		{"400, msg an object", `{"msg":{"ko":"내부 오류","en":"internal error"},"code":-1}`, 400, sdk.OutcomeTransient, "-1"},
		{"400, msg a number", `{"msg":500,"code":-1}`, 400, sdk.OutcomeTransient, "-1"},
		{"400, code quoted", `{"msg":"internal error","code":"-1"}`, 400, sdk.OutcomeTransient, "-1"},
		{"400, code -1.0", `{"msg":"internal error","code":-1.0}`, 400, sdk.OutcomeTransient, "-1"},
		{"400, code quoted final", `{"msg":"not allowed","code":"-6"}`, 400, sdk.OutcomePermanent, "-6"},
		{"400, code not a number", `{"msg":"internal error","code":"E-1"}`, 400, sdk.OutcomeTransient, ""},
		{"400, code past int64", `{"msg":"internal error","code":-99999999999999999999999}`, 400, sdk.OutcomeTransient, ""},
		{"200, code quoted", `{"msg":"internal error","code":"-1"}`, 200, sdk.OutcomeTransient, "-1"},
		{"200, code -1.0", `{"msg":"internal error","code":-1.0}`, 200, sdk.OutcomeTransient, "-1"},
		{"200, msg an object", `{"msg":{"en":"daily limit exceeded"},"code":-532}`, 200, sdk.OutcomeTransient, "-532"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.fake.answer(tc.status, tc.body)
			v := b.send(b.sender, "", textPayload)
			wantVerdict(t, v, tc.outcome, tc.status, tc.code)
		})
	}
	t.Run("friends: failure_info with a quoted code", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]any{"mode": "friends"})
		bs := b.sender.(sdk.BatchSender)
		b.fake.answer(200, `{"successful_receiver_uuids":["friend-a"],"failure_info":[{"code":"-530","msg":["refuses messages"],"receiver_uuids":["friend-b"]}]}`)
		ms := []sdk.Message{
			{ID: 1, Recipient: "friend-a", Payload: json.RawMessage(textPayload), Attempt: 1},
			{ID: 2, Recipient: "friend-b", Payload: json.RawMessage(textPayload), Attempt: 1},
		}
		vs := bs.SendBatch(t.Context(), ms)
		wantVerdict(t, vs[0], sdk.OutcomeSuccess, 200, "")
		wantVerdict(t, vs[1], sdk.OutcomePermanent, 200, "-530")
	})
}
