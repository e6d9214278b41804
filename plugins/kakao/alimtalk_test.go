package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/internal/fakesens"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// quizTemplate renders the fake's daily_quiz template from a payload.
const quizTemplate = `{"content":"{{.name}}님, 오늘의 퀴즈가 도착했어요: {{.quiz}}","buttons":[{"type":"WL","name":"풀러 가기","linkMobile":"https://quiz.example.com/today"}]}`

// newFakeSENS starts the fake partner with the quiz template approved.
func newFakeSENS(t *testing.T) *fakesens.Server {
	t.Helper()
	f, err := fakesens.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	f.Templates["daily_quiz"] = "#{name}님, 오늘의 퀴즈가 도착했어요: #{quiz}"
	return f
}

// sensChannel is an AlimTalk channel config against f, extra overriding keys of
// its alimtalk block.
func sensChannel(f *fakesens.Server, extra map[string]any) map[string]any {
	at := f.Alimtalk("daily_quiz", "")
	maps.Copy(at, extra)
	return map[string]any{"mode": "alimtalk", "alimtalk": at, "timeout": "5s"}
}

// atSetup configures an AlimTalk channel against f; it fails the test if
// either SENS key shows up in a verdict or the log afterwards.
func atSetup(t *testing.T, f *fakesens.Server, extra map[string]any, template string) (*alimtalkSender, *testenv.SyncBuffer) {
	t.Helper()
	cfg := sensChannel(f, extra)
	if template != "" {
		cfg["template"] = json.RawMessage(template)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.SyncBuffer{}
	s, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{
		Channel: "quiz", Config: raw, Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace}),
	})
	if err != nil {
		t.Fatalf("Configure: %v", err)
	}
	at := s.(*alimtalkSender)
	at.partner.(*sens).pollEvery = 10 * time.Millisecond
	return at, logs
}

func quizMessages(n int, number func(i int) string) []sdk.Message {
	ms := make([]sdk.Message, n)
	for i := range ms {
		ms[i] = sdk.Message{
			ID: int64(i + 1), Channel: "quiz", Recipient: number(i), Attempt: 1,
			Payload:  json.RawMessage(fmt.Sprintf(`{"name":"사용자%d","quiz":"수도는?"}`, i)),
			Deadline: time.Now().Add(30 * time.Second),
		}
	}
	return ms
}

func phone(i int) string { return fmt.Sprintf("010-%04d-%04d", i/10000, i%10000) }

func noSecrets(t *testing.T, logs *testenv.SyncBuffer, vs []sdk.Verdict) {
	t.Helper()
	for _, secret := range []string{fakesens.SecretKey, fakesens.AccessKey} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds a SENS key")
		}
		for i, v := range vs {
			if strings.Contains(v.Detail, secret) || strings.Contains(string(v.Result), secret) {
				t.Errorf("verdict %d holds a SENS key: %q", i, v.Detail)
			}
		}
	}
}

// rewriting is a loopback server in front of a partner's fake h that lets
// edit rewrite h's answer to each request: the shapes of answer a fake
// does not give.
func rewriting(t *testing.T, h http.Handler, edit func(r *http.Request, status int, body []byte) []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if edit != nil {
			body = edit(r, rec.Code, body)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestAlimtalk_SendBatch is the AlimTalk path end to end against the fake
// partner: requests of SENS's maximum size signed as documented, per
// recipient verdicts from Kakao's delivery results, invalid messages refused
// before sending.
func TestAlimtalk_SendBatch(t *testing.T) {
	t.Parallel()
	f := newFakeSENS(t)
	s, logs := atSetup(t, f, nil, quizTemplate)
	ms := quizMessages(250, phone)
	f.Undeliverable["01000000007"] = "3019" // not a KakaoTalk user
	f.Undeliverable["01000000008"] = "3020" // blocked the channel
	f.Flaky["01000000009"] = true           // Kakao fault once
	f.Undeliverable["01000000010"] = "3005" // sent, receipt unconfirmed: never sent again
	f.ProcessingPolls = 1                   // results show up on the second poll
	ms = append(ms,
		sdk.Message{ID: 900, Recipient: "not-a-number", Payload: ms[0].Payload},
		sdk.Message{ID: 901, Recipient: "010-1234-5678", Payload: json.RawMessage(`{"name":"x","quiz":""}`)}, // no quiz: content mismatch
		sdk.Message{ID: 903, Recipient: "010-1234-5679", Payload: json.RawMessage(`{"name":"x"}`)},           // the template needs .quiz
		sdk.Message{ID: 902, Recipient: "+82 10-9999-0000", Payload: ms[0].Payload},                          // E.164 → 01099990000
	)
	vs := s.SendBatch(t.Context(), ms)
	if len(vs) != len(ms) {
		t.Fatalf("%d verdicts for %d messages", len(vs), len(ms))
	}
	want := func(i int) (sdk.Outcome, string) {
		switch ms[i].ID {
		case 8:
			return sdk.OutcomePermanent, "3019"
		case 9:
			return sdk.OutcomePermanent, "3020"
		case 10:
			return sdk.OutcomeTransient, "9999"
		case 900, 903:
			return sdk.OutcomePermanent, ""
		case 901:
			return sdk.OutcomePermanent, "3016"
		}
		return sdk.OutcomeSuccess, ""
	}
	for i, v := range vs {
		outcome, code := want(i)
		if v.Outcome != outcome || v.ProviderCode != code {
			t.Errorf("message %d (%s): got %v code %q %q, want %v code %q", ms[i].ID, ms[i].Recipient, v.Outcome, v.ProviderCode, v.Detail, outcome, code)
		}
		if outcome == sdk.OutcomeSuccess {
			var r struct {
				Partner   string `json:"partner"`
				MessageID string `json:"message_id"`
				Code      string `json:"message_status_code"`
				Delivery  string `json:"delivery"`
			}
			wantCode, wantDelivery := "0000", ""
			if ms[i].ID == 11 {
				wantCode, wantDelivery = "3005", "unconfirmed"
			}
			if err := json.Unmarshal(v.Result, &r); err != nil || r.Code != wantCode || r.Delivery != wantDelivery || r.Partner != "sens" || r.MessageID == "" {
				t.Errorf("message %d: result %s, want SENS's message id, delivery code %s, delivery %q", ms[i].ID, v.Result, wantCode, wantDelivery)
			}
		}
	}
	for _, c := range []struct {
		id   int64
		text string
	}{{8, "not a KakaoTalk user"}, {9, "blocked AlimTalk"}, {900, `"not-a-number" is not a phone number`}, {901, "does not match the template"}, {903, `no entry for key "quiz"`}} {
		i := slices.IndexFunc(ms, func(m sdk.Message) bool { return m.ID == c.id })
		if !strings.Contains(vs[i].Detail, c.text) {
			t.Errorf("message %d: detail %q, want it to say %q", c.id, vs[i].Detail, c.text)
		}
	}
	// 252 valid messages, one template: 100 + 100 + 52.
	sizes := f.Sizes()
	slices.Sort(sizes)
	if fmt.Sprint(sizes) != "[52 100 100]" {
		t.Errorf("request sizes %v, want [52 100 100]", sizes)
	}
	for _, snd := range f.Requests() {
		for _, m := range snd.Messages {
			if m.To == "01099990000" && m.CountryCode != "82" {
				t.Errorf("+82 number sent as %s/%s", m.CountryCode, m.To)
			}
			if len(m.Buttons) != 1 || m.Buttons[0]["linkMobile"] == nil {
				t.Errorf("buttons not sent: %+v", m.Buttons)
			}
		}
		if snd.PlusFriendID != fakesens.ChannelID || snd.TemplateCode != "daily_quiz" {
			t.Errorf("request for %s/%s", snd.PlusFriendID, snd.TemplateCode)
		}
	}
	noSecrets(t, logs, vs)

	// The retry of the flaky number is delivered.
	i := slices.IndexFunc(ms, func(m sdk.Message) bool { return m.ID == 10 })
	if v := s.Send(t.Context(), ms[i]); v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("retry of a Kakao fault: got %v %q, want SUCCESS", v.Outcome, v.Detail)
	}
}

// TestAlimtalk_RequestFailures: a refused or failed request is the verdict
// of each message it carried, classified by status.
func TestAlimtalk_RequestFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answer  fakesens.Answer
		outcome sdk.Outcome
		code    string
		detail  string
		retry   time.Duration
	}{
		{"throttled", fakesens.Answer{Status: 429, Header: http.Header{"Retry-After": {"7"}}, Body: `{"error":{"errorCode":"410","message":"Throttle Limited"}}`},
			sdk.OutcomeTransient, "410", "Throttle Limited", 7 * time.Second},
		{"endpoint error", fakesens.Answer{Status: 503, Body: `{"error":{"errorCode":"500","message":"Endpoint Error"}}`},
			sdk.OutcomeTransient, "500", "Endpoint Error", 0},
		{"bad request", fakesens.Answer{Status: 400, Body: `{"status":400,"errors":"Bad Request","errorMessage":"templateCode not found"}`},
			sdk.OutcomePermanent, "400", "templateCode not found", 0},
		{"forbidden", fakesens.Answer{Status: 403, Body: `{"status":403,"errors":"Forbidden","errorMessage":"Forbidden"}`},
			sdk.OutcomePermanent, "403", "no permission", 0},
		{"a 202 that is not a send result", fakesens.Answer{Status: 202, Body: `<html>gateway</html>`},
			sdk.OutcomeTransient, "", "not its send result", 0},
		{"a proxy page", fakesens.Answer{Status: 502, Body: `<html>bad gateway</html>`},
			sdk.OutcomeTransient, "", "bad gateway", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeSENS(t)
			f.Script = []fakesens.Answer{tt.answer}
			s, logs := atSetup(t, f, map[string]any{"confirm": "accepted"}, quizTemplate)
			vs := s.SendBatch(t.Context(), quizMessages(3, phone))
			for i, v := range vs {
				if v.Outcome != tt.outcome || v.ProviderCode != tt.code || !strings.Contains(v.Detail, tt.detail) || v.RetryAfter != tt.retry {
					t.Errorf("message %d: got %v code %q retry %v %q, want %v code %q retry %v containing %q",
						i, v.Outcome, v.ProviderCode, v.RetryAfter, v.Detail, tt.outcome, tt.code, tt.retry, tt.detail)
				}
			}
			if n := len(f.Sizes()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			noSecrets(t, logs, vs)
		})
	}

	t.Run("wrong secret key", func(t *testing.T) {
		t.Parallel()
		f := newFakeSENS(t)
		s, logs := atSetup(t, f, map[string]any{"secret_key": "not-the-secret"}, quizTemplate)
		vs := s.SendBatch(t.Context(), quizMessages(2, phone))
		for _, v := range vs {
			if v.Outcome != sdk.OutcomePermanent || v.ProviderCode != "200" || !strings.Contains(v.Detail, "Authentication Failed") || !strings.Contains(v.Detail, "secret_key") {
				t.Errorf("got %v %q %q, want PERMANENT 200 naming the keys", v.Outcome, v.ProviderCode, v.Detail)
			}
			if strings.Contains(v.Detail, "not-the-secret") {
				t.Errorf("detail shows the secret: %q", v.Detail)
			}
		}
		if strings.Contains(logs.String(), "not-the-secret") {
			t.Error("log shows the secret")
		}
	})

	t.Run("unreachable partner", func(t *testing.T) {
		t.Parallel()
		f := newFakeSENS(t)
		s, _ := atSetup(t, f, nil, quizTemplate)
		_ = f.Close()
		for _, v := range s.SendBatch(t.Context(), quizMessages(2, phone)) {
			if v.Outcome != sdk.OutcomeTransient {
				t.Errorf("got %v %q, want TRANSIENT", v.Outcome, v.Detail)
			}
		}
	})
}

// TestAlimtalk_Confirm: with confirm accepted no result is asked for; with
// delivered, a result Kakao never decides leaves the message SUCCESS marked
// unconfirmed — never sent twice.
func TestAlimtalk_Confirm(t *testing.T) {
	t.Parallel()
	t.Run("accepted", func(t *testing.T) {
		t.Parallel()
		f := newFakeSENS(t)
		f.Undeliverable["01000000001"] = "3019"
		s, _ := atSetup(t, f, map[string]any{"confirm": "accepted"}, quizTemplate)
		for _, v := range s.SendBatch(t.Context(), quizMessages(3, phone)) {
			if v.Outcome != sdk.OutcomeSuccess {
				t.Errorf("got %v %q, want SUCCESS on acceptance", v.Outcome, v.Detail)
			}
		}
		if f.Polls() != 0 {
			t.Errorf("%d result polls, want none", f.Polls())
		}
	})
	t.Run("never decided", func(t *testing.T) {
		t.Parallel()
		f := newFakeSENS(t)
		f.Never = true
		s, _ := atSetup(t, f, map[string]any{"confirm_wait": "200ms"}, quizTemplate)
		for _, v := range s.SendBatch(t.Context(), quizMessages(3, phone)) {
			if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), `"delivery":"unconfirmed"`) {
				t.Errorf("got %v %s, want SUCCESS marked unconfirmed", v.Outcome, v.Result)
			}
		}
		if f.Polls() == 0 {
			t.Error("no result polls")
		}
	})
}

// TestAlimtalk_Config: every bad alimtalk config names its key.
func TestAlimtalk_Config(t *testing.T) {
	t.Parallel()
	f := newFakeSENS(t)
	base := sensChannel(f, nil)
	at := func(k string, v any) map[string]any {
		c := sensChannel(f, map[string]any{k: v})
		if v == nil {
			delete(c["alimtalk"].(map[string]any), k)
		}
		return c
	}
	tests := []struct {
		name string
		cfg  map[string]any
		key  string
	}{
		{"no alimtalk block", map[string]any{"mode": "alimtalk"}, "config.alimtalk:"},
		{"unknown partner", at("partner", "kakao-direct"), "config.alimtalk.partner"},
		{"no partner", at("partner", nil), "config.alimtalk.partner"},
		{"no secret", at("secret_key", nil), "config.alimtalk.secret_key"},
		{"no service", at("service_id", nil), "config.alimtalk.service_id"},
		{"service with a slash", at("service_id", "a/b"), "config.alimtalk.service_id"},
		{"no channel", at("channel_id", nil), "config.alimtalk.channel_id"},
		{"another partner's key", at("sender_key", "nhn-sender"), "config.alimtalk.sender_key: not used with partner sens"},
		{"too many per request", at("max_per_request", 101), "config.alimtalk.max_per_request"},
		{"bad confirm", at("confirm", "sometimes"), "config.alimtalk.confirm"},
		{"bad failover", at("failover", map[string]any{"type": "MMS", "from": "0212345678"}), "config.alimtalk.failover.type"},
		{"failover without from", at("failover", map[string]any{"type": "SMS"}), "config.alimtalk.failover.from"},
		{"a Talk Message token", func() map[string]any { c := sensChannel(f, nil); c["access_token"] = "x"; return c }(), "config.access_token"},
		{"alimtalk block in friends mode", map[string]any{"mode": "friends", "access_token": "a", "alimtalk": base["alimtalk"]}, "config.alimtalk:"},
		{"template not an object", func() map[string]any { c := sensChannel(f, nil); c["template"] = "text"; return c }(), "config.template"},
	}
	for _, tt := range tests {
		raw, _ := json.Marshal(tt.cfg)
		_, err := (&provider{}).Configure(context.Background(), sdktest.ConfigureRequest(t, raw))
		var ce *ConfigError
		if err == nil || !strings.Contains(err.Error(), tt.key) || (!errors.As(err, &ce) && !strings.Contains(err.Error(), "config")) {
			t.Errorf("%s: got %v, want an error naming %s", tt.name, err, tt.key)
		}
		if err != nil && strings.Contains(err.Error(), fakesens.SecretKey) {
			t.Errorf("%s: the error shows the secret key", tt.name)
		}
	}
}

// TestAlimtalk_Conformance runs the SDK's conformance suite over an
// AlimTalk channel against the fake partner.
func TestAlimtalk_Conformance(t *testing.T) {
	t.Parallel()
	f := newFakeSENS(t)
	f.Undeliverable["01099990019"] = "3019"
	cfg := sensChannel(f, map[string]any{})
	cfg["template"] = json.RawMessage(quizTemplate)
	raw, _ := json.Marshal(cfg)
	payload := json.RawMessage(`{"name":"민지","quiz":"수도는?"}`)
	rep := sdktest.Run(t, &provider{}, sdktest.Features{
		Config: raw,
		Invalid: map[string]json.RawMessage{
			"no partner":   json.RawMessage(`{"mode":"alimtalk","alimtalk":{}}`),
			"tokens mixed": json.RawMessage(`{"mode":"alimtalk","access_token":"a","alimtalk":{"partner":"sens"}}`),
		},
		Succeed:   sdk.Message{Recipient: "010-1234-0001", Payload: payload},
		Permanent: &sdk.Message{Recipient: "010-9999-0019", Payload: payload},
		Batch:     120,
		// Four batches of this size at once against the fake: on a busy
		// machine that took past the 10 s default once (issue 28).
		Timeout: time.Minute,
	})
	if len(rep.Sent) == 0 {
		t.Fatal("nothing delivered")
	}
	for _, n := range f.Sizes() {
		if n > sensMaxMessages {
			t.Errorf("a request carried %d messages", n)
		}
	}
}

// TestSENS_verdictsMatchByNumber: an answer out of order is matched by
// number; a number SENS does not list, or lists twice out of order, is
// never credited with another's result.
func TestSENS_verdictsMatchByNumber(t *testing.T) {
	t.Parallel()
	p := &sens{c: &atConfig{}}
	ms := []*atMessage{{to: "0101"}, {to: "0102"}, {to: "0103"}, {to: "0104"}, {to: "0104"}}
	var a sensAnswer
	if err := json.Unmarshal([]byte(`{"requestId":"R1","messages":[
		{"messageId":"m2","to":"0102","requestStatusCode":"A000"},
		{"messageId":"m1","to":"0101","requestStatusCode":"A000"},
		{"messageId":"m4","to":"0104","requestStatusCode":"A000"},
		{"messageId":"m5","to":"0104","requestStatusCode":"A000"}]}`), &a); err != nil {
		t.Fatal(err)
	}
	vs, _ := p.verdicts(202, &a, ms)
	for i, want := range []struct {
		outcome sdk.Outcome
		id      string
	}{
		{sdk.OutcomeSuccess, "m1"}, {sdk.OutcomeSuccess, "m2"}, // matched by number
		{sdk.OutcomeTransient, ""}, // not listed
		{sdk.OutcomeSuccess, "m5"}, // in place, and the number agrees
		{sdk.OutcomeTransient, ""}, // out of place, and its number is listed twice
	} {
		if vs[i].Outcome != want.outcome || (want.id != "" && !strings.Contains(string(vs[i].Result), `"message_id":"`+want.id+`"`)) {
			t.Errorf("message %d: got %v %s %q, want %v %s", i, vs[i].Outcome, vs[i].Result, vs[i].Detail, want.outcome, want.id)
		}
	}
}

// TestSENS_Failover: a message whose AlimTalk Kakao did not deliver and
// whose SMS/LMS failover SENS reports delivered is SENT with the failover
// named; while the failover's outcome is unknown it is SENT unconfirmed;
// only a failover that failed lets a transient code retry. An unknown or
// "status unknown" delivery code is never sent again.
func TestSENS_Failover(t *testing.T) {
	t.Parallel()
	f := newFakeSENS(t)
	s, logs := atSetup(t, f, map[string]any{"failover": map[string]any{"type": "LMS", "from": "0212345678"}}, quizTemplate)
	ms := quizMessages(7, phone)
	f.Undeliverable["01000000000"] = "1030" // a code the plugin does not know…
	f.Failover["01000000000"] = "success"   // …and the LMS went out
	f.Flaky["01000000001"] = true           // 9999 (transient)…
	f.Failover["01000000001"] = "success"   // …and the LMS went out
	f.Flaky["01000000002"] = true           // 9999, the failover not reported yet
	f.Flaky["01000000003"] = true           // 9999, the failover failed too
	f.Failover["01000000003"] = "fail"
	f.Undeliverable["01000000004"] = "4001" // status unknown
	f.Failover["01000000004"] = "fail"
	f.Undeliverable["01000000005"] = "3019" // not a KakaoTalk user: final, the failover failed
	f.Failover["01000000005"] = "fail"
	vs := s.SendBatch(t.Context(), ms)
	want := []struct {
		outcome sdk.Outcome
		result  string
	}{
		{sdk.OutcomeSuccess, `"failover":"delivered"`},
		{sdk.OutcomeSuccess, `"failover":"delivered"`},
		{sdk.OutcomeSuccess, `"delivery":"unconfirmed"`},
		{sdk.OutcomeTransient, `"failover":"failed"`},
		{sdk.OutcomeSuccess, `"delivery":"unconfirmed"`},
		{sdk.OutcomePermanent, `"failover":"failed"`},
		{sdk.OutcomeSuccess, `"message_status_code":"0000"`},
	}
	for i, v := range vs {
		if v.Outcome != want[i].outcome || !strings.Contains(string(v.Result), want[i].result) {
			t.Errorf("%s: got %v %q %s, want %v with %s", ms[i].Recipient, v.Outcome, v.Detail, v.Result, want[i].outcome, want[i].result)
		}
	}
	if n := len(f.Requests()); n != 1 {
		t.Errorf("%d send requests, want 1", n)
	}
	noSecrets(t, logs, vs)
}

// TestSENS_AcceptedThen500: SENS took the request and the gateway answered
// 500: the plugin finds the messages in the result list and reports them
// SENT; none is sent a second time.
func TestSENS_AcceptedThen500(t *testing.T) {
	t.Parallel()
	for _, confirm := range []string{"accepted", "delivered"} {
		t.Run(confirm, func(t *testing.T) {
			t.Parallel()
			f := newFakeSENS(t)
			s, logs := atSetup(t, f, map[string]any{"confirm": confirm}, quizTemplate)
			f.AcceptThenFail = 1
			ms := quizMessages(5, phone)
			ms = append(ms, sdk.Message{ID: 99, Recipient: phone(0), Payload: json.RawMessage(`{"name":"다른","quiz":"수도는?"}`), Attempt: 1})
			vs := s.SendBatch(t.Context(), ms)
			for i, v := range vs {
				if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), "reconciled") {
					t.Errorf("message %d: %v %q %s, want SENT, reconciled", ms[i].ID, v.Outcome, v.Detail, v.Result)
				}
			}
			if n := len(f.Requests()); n != 1 {
				t.Errorf("%d send requests, want 1 (nothing sent twice)", n)
			}
			if d := f.Delivered(); d["01000000000"] != 2 || d["01000000001"] != 1 {
				t.Errorf("deliveries %v, want 2 for the number with two messages, 1 for the others", d)
			}
			noSecrets(t, logs, vs)
		})
	}
	t.Run("not accepted", func(t *testing.T) {
		t.Parallel()
		f := newFakeSENS(t)
		s, _ := atSetup(t, f, nil, quizTemplate)
		f.Script = []fakesens.Answer{{Status: 503, Body: `{"error":{"errorCode":"500","message":"Endpoint Error"}}`}}
		for i, v := range s.SendBatch(t.Context(), quizMessages(2, phone)) {
			if v.Outcome != sdk.OutcomeTransient {
				t.Errorf("message %d after a 503 SENS did not accept: %v %q, want TRANSIENT", i, v.Outcome, v.Detail)
			}
		}
	})
}

// TestSENS_verdictsMatchFormattedNumbers: a partner that echoes the number
// formatted (+82, dashes, spaces) still credits the message it took: left
// unlisted, it would be retried and sent again (SENS has no idempotency
// key). NHN Cloud's answers are read the same way.
func TestSENS_verdictsMatchFormattedNumbers(t *testing.T) {
	t.Parallel()
	p := &sens{c: &atConfig{}}
	ms := []*atMessage{{country: "82", to: "01012345678"}, {country: "82", to: "01012345679"}, {country: "82", to: "01012345670"}}
	var a sensAnswer
	if err := json.Unmarshal([]byte(`{"requestId":"R1","messages":[
		{"messageId":"m2","to":"010-1234-5679","requestStatusCode":"A000"},
		{"messageId":"m1","to":"+82 10-1234-5678","requestStatusCode":"A000"},
		{"messageId":"m3","to":"+821012345670","requestStatusCode":"A000"}]}`), &a); err != nil {
		t.Fatal(err)
	}
	vs, _ := p.verdicts(202, &a, ms)
	for i, v := range vs {
		if want := fmt.Sprintf(`"message_id":"m%d"`, i+1); v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), want) {
			t.Errorf("message %d: %v %s %q; want SENT as %s", i, v.Outcome, v.Result, v.Detail, want)
		}
	}
	if got := echoedNumber("+82 (10) 1234-5678", "82"); got != "01012345678" {
		t.Errorf("echoedNumber(+82 (10) 1234-5678) = %q, want 01012345678", got)
	}
}

// TestSENS_DeliveryCodeRange: Kakao's item-list and highlight checks,
// 3033–3058, are final; a code of another length that sorts among them as
// text ("305", "30401") is one the plugin does not know, kept SENT,
// unconfirmed (Kakao did not say it failed). classifyDelivery compared the
// codes as strings and dead-lettered those as a template mismatch.
func TestSENS_DeliveryCodeRange(t *testing.T) {
	t.Parallel()
	f := newFakeSENS(t)
	f.Undeliverable["01000000000"] = "305"
	f.Undeliverable["01000000001"] = "30401"
	f.Undeliverable["01000000002"] = "3040"
	s, _ := atSetup(t, f, map[string]any{"confirm_wait": "2s"}, quizTemplate)
	vs := s.SendBatch(t.Context(), quizMessages(3, phone))
	for i, v := range vs[:2] {
		if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), "unconfirmed") {
			t.Errorf("message %d, delivery code unknown to the plugin: %v %s %q, want SENT, unconfirmed", i, v.Outcome, v.Result, v.Detail)
		}
	}
	if v := vs[2]; v.Outcome != sdk.OutcomePermanent || v.ProviderCode != "3040" {
		t.Errorf("message 2, delivery code 3040: %v code %q %q, want PERMANENT 3040", v.Outcome, v.ProviderCode, v.Detail)
	}
}

// TestSENS_ShortAnswerReconciled: SENS took every message of a request but
// its answer lists one fewer. The unlisted message is looked up in the
// result list, as after a lost answer, and found SENT; the others keep the
// answer's verdicts, and the request is confirmed once. It was retried at
// once without the lookup, and the retry delivered it twice (SENS has no
// idempotency key).
func TestSENS_ShortAnswerReconciled(t *testing.T) {
	t.Parallel()
	for _, confirm := range []string{"accepted", "delivered"} {
		t.Run(confirm, func(t *testing.T) {
			t.Parallel()
			f := newFakeSENS(t)
			front := rewriting(t, f, func(r *http.Request, status int, body []byte) []byte {
				if r.Method != http.MethodPost || status/100 != 2 {
					return body
				}
				var a map[string]any
				if json.Unmarshal(body, &a) != nil {
					return body
				}
				if msgs, ok := a["messages"].([]any); ok && len(msgs) > 1 {
					a["messages"] = msgs[:len(msgs)-1]
				}
				out, _ := json.Marshal(a)
				return out
			})
			s, logs := atSetup(t, f, map[string]any{"confirm": confirm, "api_url": front.URL}, quizTemplate)
			vs := s.SendBatch(t.Context(), quizMessages(3, phone))
			for i, v := range vs {
				if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), fmt.Sprintf(`"message_id":"RAPI-00000001-00%d"`, i)) {
					t.Errorf("message %d: %v %q %s, want SENT as its own messageId", i, v.Outcome, v.Detail, v.Result)
				}
				if confirm == "delivered" && !strings.Contains(string(v.Result), `"message_status_code":"0000"`) {
					t.Errorf("message %d: result %s, want its delivery result", i, v.Result)
				}
			}
			if !strings.Contains(string(vs[2].Result), "reconciled") {
				t.Errorf("the message the answer left out: result %s, want it reconciled", vs[2].Result)
			}
			// One lookup by request time, and (delivered) one poll of the
			// request's results for all three, not one more for the third.
			if want := map[string]int{"accepted": 1, "delivered": 2}[confirm]; f.Polls() != want {
				t.Errorf("%d list requests, want %d", f.Polls(), want)
			}
			if n := len(f.Requests()); n != 1 {
				t.Errorf("%d send requests, want 1", n)
			}
			noSecrets(t, logs, vs)
		})
	}
}

// TestSENS_ReconcileSkipsRefused: SENS took a request, refused one of its
// messages (a requestStatusCode other than A000: never sent) and the
// gateway then answered 500. The result list shows the refused message
// with its code, and with the same number and content as the request's:
// credited from the list, it was SENT ("reconciled") and never delivered.
// Only a listed message SENS accepted is credited; the refused one keeps
// SENS's own verdict, retried.
func TestSENS_ReconcileSkipsRefused(t *testing.T) {
	t.Parallel()
	for _, confirm := range []string{"accepted", "delivered"} {
		t.Run(confirm, func(t *testing.T) {
			t.Parallel()
			f := newFakeSENS(t)
			s, logs := atSetup(t, f, map[string]any{"confirm": confirm}, quizTemplate)
			f.Refused["01000000001"] = "E011"
			f.AcceptThenFail = 1
			vs := s.SendBatch(t.Context(), quizMessages(3, phone))
			for i, v := range vs {
				switch {
				case i == 1 && (v.Outcome != sdk.OutcomeTransient || v.ProviderCode != "E011"):
					t.Errorf("the refused message: %v %q (code %q) %s, want TRANSIENT with SENS's code E011", v.Outcome, v.Detail, v.ProviderCode, v.Result)
				case i != 1 && (v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), "reconciled")):
					t.Errorf("message %d: %v %q %s, want SENT, reconciled", i, v.Outcome, v.Detail, v.Result)
				}
			}
			if d := f.Delivered(); d["01000000001"] != 0 {
				t.Errorf("deliveries %v: the refused number was delivered", d)
			}
			noSecrets(t, logs, vs)
		})
	}
}

// TestSENS_EntryWithoutStatusReconciled: SENS accepted a request (202) and
// listed every message, one of them without its requestStatusCode (left
// out, null or empty). That entry says nothing of the message: taken for a
// refusal, it was retried at once, and SENS (no idempotency key) delivered
// it twice. It goes through the list lookup an unlisted message gets, and
// is found SENT.
func TestSENS_EntryWithoutStatusReconciled(t *testing.T) {
	t.Parallel()
	for _, shape := range []string{"left out", "null", "empty"} {
		t.Run(shape, func(t *testing.T) {
			t.Parallel()
			f := newFakeSENS(t)
			front := rewriting(t, f, func(r *http.Request, status int, body []byte) []byte {
				if r.Method != http.MethodPost || status/100 != 2 {
					return body
				}
				var a map[string]any
				if json.Unmarshal(body, &a) != nil {
					return body
				}
				if msgs, ok := a["messages"].([]any); ok && len(msgs) > 1 {
					m := msgs[1].(map[string]any)
					switch shape {
					case "left out":
						delete(m, "requestStatusCode")
					case "null":
						m["requestStatusCode"] = nil
					case "empty":
						m["requestStatusCode"] = ""
					}
				}
				out, _ := json.Marshal(a)
				return out
			})
			s, logs := atSetup(t, f, map[string]any{"confirm": "accepted", "api_url": front.URL}, quizTemplate)
			vs := s.SendBatch(t.Context(), quizMessages(3, phone))
			for i, v := range vs {
				if v.Outcome != sdk.OutcomeSuccess {
					t.Errorf("message %d: %v %q, want SENT (SENS accepted it)", i, v.Outcome, v.Detail)
				}
			}
			if !strings.Contains(string(vs[1].Result), "reconciled") {
				t.Errorf("the entry without a status: result %s, want it reconciled from the list", vs[1].Result)
			}
			if n := len(f.Requests()); n != 1 {
				t.Errorf("%d send requests, want 1", n)
			}
			noSecrets(t, logs, vs)
		})
	}
}

// TestSENS_ConfirmRepeatedMessageID: SENS gives two messages of a request
// the same messageId (in its answer and in its result list). The delivery
// poll went by messageId alone: the first list entry with it settled
// whichever message held it last, so the undeliverable message (3019) took
// its batch-mate's delivery and was SENT "delivered", or the delivered one
// took the other's 3019 and was dead-lettered. A list entry settles a
// message only with its number; a messageId two messages claim says
// nothing of either.
func TestSENS_ConfirmRepeatedMessageID(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"as listed", "reversed"} {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			f := newFakeSENS(t)
			f.Undeliverable["01000000001"] = "3019"
			front := rewriting(t, f, func(r *http.Request, status int, body []byte) []byte {
				if status/100 != 2 {
					return body
				}
				var a map[string]any
				if json.Unmarshal(body, &a) != nil {
					return body
				}
				msgs, _ := a["messages"].([]any)
				for _, m := range msgs {
					if m := m.(map[string]any); m["messageId"] == "RAPI-00000001-001" {
						m["messageId"] = "RAPI-00000001-000"
					}
				}
				if r.Method == http.MethodGet && order == "reversed" {
					slices.Reverse(msgs)
				}
				out, _ := json.Marshal(a)
				return out
			})
			s, logs := atSetup(t, f, map[string]any{"api_url": front.URL, "confirm_wait": "2s"}, quizTemplate)
			vs := s.SendBatch(t.Context(), quizMessages(3, phone))
			if v := vs[1]; v.Outcome != sdk.OutcomePermanent || v.ProviderCode != "3019" {
				t.Errorf("the undeliverable message: %v %q %s, want PERMANENT with its own 3019", v.Outcome, v.Detail, v.Result)
			}
			if v := vs[0]; v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), `"message_status_code":"0000"`) {
				t.Errorf("the delivered message: %v %q %s, want SENT with its own delivery result", v.Outcome, v.Detail, v.Result)
			}
			if v := vs[2]; v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), `"message_status_code":"0000"`) {
				t.Errorf("message 2: %v %s, want SENT with its delivery result", v.Outcome, v.Result)
			}
			noSecrets(t, logs, vs)
		})
	}
}
