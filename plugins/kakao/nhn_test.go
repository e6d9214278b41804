package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// The fake's credentials (loopback only, never real ones).
const (
	nhnTestAppKey    = "nhnFakeAppKey01"
	nhnTestSecret    = "nhn-fake-secret-key-0123"
	nhnTestSenderKey = "0123456789abcdef0123456789abcdef01234567" // 40 characters, as documented
)

// fakeNHN is a fake NHN Cloud KakaoTalk Bizmessage on loopback: the
// documented raw-messages send (X-Secret-Key, the appkey in the path,
// senderKey, templateCode, at most 1,000 recipients, a header and a
// sendResults entry per recipient) and the message list by requestId with
// messageStatus, Kakao's resultCode and the failover's resendStatus. Set its
// maps before the first request.
type fakeNHN struct {
	srv *httptest.Server

	// Templates are the approved templates by code; a recipient's content
	// must match its template with #{variables} as wildcards (else -3010).
	Templates map[string]string
	// Refuse numbers get this per-recipient resultCode at send.
	Refuse map[string]int
	// Undeliverable numbers get this Kakao delivery result code.
	Undeliverable map[string]string
	// Flaky numbers fail their first delivery with 9999, then succeed.
	Flaky map[string]bool
	// FailoverDelivers numbers whose failed AlimTalk the SMS/LMS failover
	// delivers (RSC04) when the recipient asked for it.
	FailoverDelivers map[string]bool
	// Cancelled numbers are listed messageStatus CANCEL.
	Cancelled map[string]bool
	// ProcessingPolls is how many list polls see a request undecided;
	// Never keeps it undecided.
	ProcessingPolls int
	Never           bool
	// Script answers the next send requests as given, in order, after the
	// path and secret checks; ListScript the next list requests.
	Script     []nhnFakeAnswer
	ListScript []nhnFakeAnswer
	// AcceptThenFail: the next sends are accepted (sent, listed) and then
	// answered HTTP 500, as when a gateway fails after NHN Cloud took the
	// request.
	AcceptThenFail int
	// AcceptThenHang: the next sends are accepted (sent, listed) and then
	// never answered, until the client gives up: a timeout after NHN Cloud
	// took the request.
	AcceptThenHang int

	keys map[string]bool // X-NC-API-IDEMPOTENCY-KEYs of accepted requests
	sent []string        // each accepted request's key, in order

	mu         sync.Mutex
	sends      []nhnSent
	requests   map[string][]nhnFakeItem // requestId → its recipients
	polled     map[string]int
	polls      int
	seq        int
	attempts   map[string]int
	violations []string
}

type nhnFakeAnswer struct {
	Status int
	Header http.Header
	Body   string
}

// nhnSent is a send request as the fake decoded it: documented fields only
// (an undocumented one is refused).
type nhnSent struct {
	SenderKey         string             `json:"senderKey"`
	TemplateCode      string             `json:"templateCode"`
	RecipientList     []nhnSentRecipient `json:"recipientList"`
	RequestDate       string             `json:"requestDate"`
	SenderGroupingKey string             `json:"senderGroupingKey"`
}

type nhnSentRecipient struct {
	RecipientNo    string `json:"recipientNo"`
	Content        string `json:"content"`
	TemplateTitle  string `json:"templateTitle"`
	TemplateHeader string `json:"templateHeader"`
	Buttons        []struct {
		Ordering      int    `json:"ordering"`
		Type          string `json:"type"`
		Name          string `json:"name"`
		LinkMo        string `json:"linkMo"`
		LinkPc        string `json:"linkPc"`
		SchemeIos     string `json:"schemeIos"`
		SchemeAndroid string `json:"schemeAndroid"`
	} `json:"buttons"`
	ResendParameter *struct {
		IsResend      bool   `json:"isResend"`
		ResendType    string `json:"resendType"`
		ResendTitle   string `json:"resendTitle"`
		ResendContent string `json:"resendContent"`
		ResendSendNo  string `json:"resendSendNo"`
	} `json:"resendParameter"`
	RecipientGroupingKey string `json:"recipientGroupingKey"`
}

type nhnFakeItem struct {
	requestID, senderKey string
	recipientKey         string
	seq                  int
	no, code, resend     string
	cancelled, isResend  bool
	failoverDeliversThis bool
}

// nhnMobile is what the fake takes for a Korean mobile number.
var nhnMobile = regexp.MustCompile(`^01[0-9]{8,9}$`)

func newFakeNHN(t *testing.T) *fakeNHN {
	t.Helper()
	f := &fakeNHN{
		Templates: map[string]string{"daily_quiz": "#{name}님, 오늘의 퀴즈가 도착했어요: #{quiz}"},
		Refuse:    map[string]int{}, Undeliverable: map[string]string{}, Flaky: map[string]bool{},
		FailoverDelivers: map[string]bool{}, Cancelled: map[string]bool{},
		requests: map[string][]nhnFakeItem{}, polled: map[string]int{}, attempts: map[string]int{}, keys: map[string]bool{},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewUnstartedServer(f)
	f.srv.Listener = ln
	f.srv.Start()
	t.Cleanup(func() {
		f.srv.Close()
		if v := f.Violations(); len(v) > 0 {
			t.Errorf("the fake NHN Cloud saw requests against its documented API: %q", v)
		}
	})
	return f
}

// Alimtalk is an `alimtalk:` block for partner nhn pointing at the fake.
func (f *fakeNHN) Alimtalk() map[string]any {
	return map[string]any{
		"partner": "nhn", "api_url": f.srv.URL, "app_key": nhnTestAppKey, "secret_key": nhnTestSecret,
		"sender_key": nhnTestSenderKey, "template_code": "daily_quiz",
	}
}

func (f *fakeNHN) Sends() []nhnSent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sends)
}

func (f *fakeNHN) Sizes() []int {
	var n []int
	for _, s := range f.Sends() {
		n = append(n, len(s.RecipientList))
	}
	return n
}

func (f *fakeNHN) Polls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}

func (f *fakeNHN) Violations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.violations)
}

func (f *fakeNHN) violate(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.violations = append(f.violations, fmt.Sprintf(format, a...))
}

func nhnHeaderJSON(ok bool, code int, msg string) map[string]any {
	return map[string]any{"isSuccessful": ok, "resultCode": code, "resultMessage": msg}
}

func nhnWrite(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// nhnFail answers isSuccessful false with code, HTTP 200 (NHN Cloud puts
// the outcome in the header).
func nhnFail(w http.ResponseWriter, code int, msg string) {
	nhnWrite(w, http.StatusOK, map[string]any{"header": nhnHeaderJSON(false, code, msg)})
}

func (f *fakeNHN) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/alimtalk/v2.3/appkeys/")
	appKey, endpoint, _ := strings.Cut(rest, "/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if appKey != nhnTestAppKey {
		nhnFail(w, -1000, "Invalid appKey.")
		return
	}
	if r.Header.Get("X-Secret-Key") != nhnTestSecret {
		nhnFail(w, -1001, "Invalid secretKey.")
		return
	}
	switch {
	case r.Method == http.MethodPost && endpoint == "raw-messages":
		f.send(w, r)
	case r.Method == http.MethodGet && endpoint == "messages":
		f.list(w, r)
	default:
		nhnFail(w, -9998, "Not exist API")
	}
}

func (f *fakeNHN) scripted(w http.ResponseWriter, script *[]nhnFakeAnswer) bool {
	f.mu.Lock()
	if len(*script) == 0 {
		f.mu.Unlock()
		return false
	}
	a := (*script)[0]
	*script = (*script)[1:]
	f.mu.Unlock()
	maps.Copy(w.Header(), a.Header)
	w.WriteHeader(a.Status)
	_, _ = io.WriteString(w, a.Body)
	return true
}

func (f *fakeNHN) pattern(code string) (*regexp.Regexp, bool) {
	t, ok := f.Templates[code]
	if !ok {
		return nil, false
	}
	parts := regexp.MustCompile(`#\{[^}]+\}`).Split(t, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)^` + strings.Join(parts, `.+`) + `$`), true
}

func (f *fakeNHN) send(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		f.violate("Content-Type %q", ct)
		nhnFail(w, -9996, "Only application/json Content-type is supported.")
		return
	}
	var body nhnSent
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		f.violate("body: %v", err)
		nhnFail(w, -3002, "Field is not valid.")
		return
	}
	f.mu.Lock()
	f.sends = append(f.sends, body)
	f.mu.Unlock()
	if n := len(body.RecipientList); n == 0 || n > nhnMaxRecipients {
		f.violate("%d recipients in one request", n)
		nhnFail(w, -2004, "The 'recipientList' must be between 1 and 1000.")
		return
	}
	for _, rc := range body.RecipientList {
		for k, b := range rc.Buttons {
			if b.Ordering != k+1 || b.Type == "" || b.Name == "" {
				f.violate("button %d: %+v", k, b)
			}
		}
	}
	if f.scripted(w, &f.Script) {
		return
	}
	if body.SenderKey != nhnTestSenderKey {
		nhnFail(w, -2017, "Not exist plus friend.")
		return
	}
	pattern, ok := f.pattern(body.TemplateCode)
	if !ok {
		nhnFail(w, -3003, "Template does not exist.")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.Header.Get("X-NC-API-IDEMPOTENCY-KEY")
	if key != "" && f.keys[key] {
		// The fake's tests run within 10 minutes: a key used before is
		// refused (error codes: -1005).
		nhnFail(w, -1005, "The same 'X-NC-API-IDEMPOTENCY-KEY' was used within the last 10 minute.")
		return
	}
	if key != "" {
		f.keys[key] = true
		f.sent = append(f.sent, key)
	}
	f.seq++
	id := fmt.Sprintf("20260101000000nhn%05d", f.seq)
	results := make([]map[string]any, len(body.RecipientList))
	for k, rc := range body.RecipientList {
		code, msg := 0, "SUCCESS"
		switch {
		case !nhnMobile.MatchString(rc.RecipientNo):
			code, msg = -4019, "Invalid recipient number."
		case f.Refuse[rc.RecipientNo] != 0:
			code, msg = f.Refuse[rc.RecipientNo], "refused as scripted"
		case !pattern.MatchString(rc.Content):
			code, msg = -3010, "The contents do not match the template."
		}
		results[k] = map[string]any{"recipientSeq": k + 1, "recipientNo": rc.RecipientNo, "resultCode": code, "resultMessage": msg}
		if code != 0 {
			continue
		}
		f.attempts[rc.RecipientNo]++
		it := nhnFakeItem{requestID: id, senderKey: body.SenderGroupingKey, recipientKey: rc.RecipientGroupingKey,
			seq: k + 1, no: rc.RecipientNo, code: "1000", resend: "RSC01", cancelled: f.Cancelled[rc.RecipientNo]}
		if rc.ResendParameter != nil && rc.ResendParameter.IsResend {
			it.isResend, it.resend = true, "RSC02"
		}
		switch {
		case f.Undeliverable[rc.RecipientNo] != "":
			it.code = f.Undeliverable[rc.RecipientNo]
		case f.Flaky[rc.RecipientNo] && f.attempts[rc.RecipientNo] == 1:
			it.code = "9999"
		}
		if it.code != "1000" && it.isResend {
			it.resend = "RSC05"
			if f.FailoverDelivers[rc.RecipientNo] {
				it.resend = "RSC04"
			}
		}
		f.requests[id] = append(f.requests[id], it)
	}
	if f.AcceptThenHang > 0 {
		f.AcceptThenHang--
		f.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		f.mu.Lock()
		return
	}
	if f.AcceptThenFail > 0 {
		f.AcceptThenFail--
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "<html>500 Internal Server Error</html>")
		return
	}
	nhnWrite(w, http.StatusOK, map[string]any{
		"header":  nhnHeaderJSON(true, 0, "SUCCESS"),
		"message": map[string]any{"requestId": id, "senderGroupingKey": body.SenderGroupingKey, "sendResults": results},
	})
}

// Keys are the idempotency keys of the accepted requests, in order.
func (f *fakeNHN) Keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

func (f *fakeNHN) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("requestId")
	page, _ := strconv.Atoi(q.Get("pageNum"))
	size, _ := strconv.Atoi(q.Get("pageSize"))
	_, errStart := time.Parse("2006-01-02 15:04", q.Get("startRequestDate"))
	_, errEnd := time.Parse("2006-01-02 15:04", q.Get("endRequestDate"))
	if (id == "" && (errStart != nil || errEnd != nil)) || page < 1 || size < 1 || size > 1000 {
		f.violate("list query %q", r.URL.RawQuery)
		nhnFail(w, -4000, "Invalid parameter")
		return
	}
	f.mu.Lock()
	f.polls++
	f.mu.Unlock()
	if f.scripted(w, &f.ListScript) {
		return
	}
	f.mu.Lock()
	var items []nhnFakeItem
	if id != "" {
		f.polled[id]++
		items = f.requests[id]
	} else {
		for rid, its := range f.requests {
			for _, it := range its {
				if key := q.Get("senderGroupingKey"); key == "" || key == it.senderKey {
					items = append(items, it)
				}
			}
			_ = rid
		}
		slices.SortFunc(items, func(a, b nhnFakeItem) int {
			return cmp.Or(strings.Compare(a.requestID, b.requestID), a.seq-b.seq)
		})
	}
	f.mu.Unlock()
	var msgs []map[string]any
	for i := (page - 1) * size; i < len(items) && i < page*size; i++ {
		it := items[i]
		f.mu.Lock()
		decided := !f.Never && f.polled[it.requestID] > f.ProcessingPolls
		f.mu.Unlock()
		m := map[string]any{"requestId": it.requestID, "recipientSeq": it.seq, "recipientNo": it.no, "senderKey": nhnTestSenderKey,
			"senderGroupingKey": it.senderKey, "recipientGroupingKey": it.recipientKey,
			"templateCode": "daily_quiz", "messageStatus": "READY", "resultCode": nil, "resultCodeName": nil, "resendStatus": "RSC01"}
		if it.isResend {
			m["resendStatus"] = "RSC02"
		}
		switch {
		case decided && it.cancelled:
			m["messageStatus"] = "CANCEL"
		case decided:
			m["messageStatus"], m["resultCode"], m["resendStatus"] = "COMPLETED", it.code, it.resend
			m["resultCodeName"] = "성공"
			if it.code != "1000" {
				m["messageStatus"], m["resultCodeName"] = "FAILED", "실패"
			}
		}
		msgs = append(msgs, m)
	}
	nhnWrite(w, http.StatusOK, map[string]any{
		"header":                      nhnHeaderJSON(true, 0, "SUCCESS"),
		"messageSearchResultResponse": map[string]any{"messages": msgs, "totalCount": len(items)},
	})
}

// nhnChannel is an AlimTalk channel config against f, extra overriding keys
// of its alimtalk block (a nil value deletes the key).
func nhnChannel(f *fakeNHN, extra map[string]any) map[string]any {
	at := f.Alimtalk()
	for k, v := range extra {
		if v == nil {
			delete(at, k)
		} else {
			at[k] = v
		}
	}
	return map[string]any{"mode": "alimtalk", "alimtalk": at, "timeout": "5s", "template": json.RawMessage(quizTemplate)}
}

// nhnSetup configures an NHN AlimTalk channel against f; the secret key
// must never show up in a verdict or the log (checked by nhnNoSecrets).
func nhnSetup(t *testing.T, f *fakeNHN, extra map[string]any) (*alimtalkSender, *testenv.SyncBuffer) {
	t.Helper()
	return nhnSetupChannel(t, nhnChannel(f, extra))
}

func nhnSetupChannel(t *testing.T, cfg map[string]any) (*alimtalkSender, *testenv.SyncBuffer) {
	t.Helper()
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
	at.partner.(*nhn).pollEvery = 10 * time.Millisecond
	return at, logs
}

func nhnNoSecrets(t *testing.T, logs *testenv.SyncBuffer, vs []sdk.Verdict, secrets ...string) {
	t.Helper()
	for _, secret := range append(secrets, nhnTestSecret) {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds the secret %q", secret)
		}
		for i, v := range vs {
			if strings.Contains(v.Detail, secret) || strings.Contains(string(v.Result), secret) {
				t.Errorf("verdict %d holds the secret %q: %q %s", i, secret, v.Detail, v.Result)
			}
		}
	}
}

func byID(ms []sdk.Message, id int64) int {
	return slices.IndexFunc(ms, func(m sdk.Message) bool { return m.ID == id })
}

// TestNHN_SendBatch is partner nhn end to end against the fake: 2,500
// messages become 3 requests of at most 1,000, every message gets its own
// verdict from its resultCode and Kakao's delivery result, and invalid
// messages are refused before sending.
func TestNHN_SendBatch(t *testing.T) {
	t.Parallel()
	f := newFakeNHN(t)
	f.Undeliverable["01000000007"] = "3019" // not a KakaoTalk user
	f.Undeliverable["01000000008"] = "3020" // blocked the channel
	f.Undeliverable["01000000011"] = "3005" // sent, not confirmed
	f.Flaky["01000000009"] = true           // Kakao fault once
	f.Refuse["01000000012"] = -4019         // invalid recipient number
	f.Refuse["01000000013"] = -9999         // NHN Cloud system error
	f.Refuse["01000000014"] = -4242         // a code no document lists
	f.Cancelled["01000000015"] = true
	f.ProcessingPolls = 1 // results show up on the second poll
	s, logs := nhnSetup(t, f, nil)
	ms := quizMessages(2500, phone)
	ms = append(ms,
		sdk.Message{ID: 9000, Recipient: "not-a-number", Payload: ms[0].Payload},
		sdk.Message{ID: 9001, Recipient: "010-1234-5678", Payload: json.RawMessage(`{"name":"x","quiz":""}`)}, // content mismatch
		sdk.Message{ID: 9002, Recipient: "+82 10-9999-0000", Payload: ms[0].Payload},
		sdk.Message{ID: 9003, Recipient: "010-1234-5679", Payload: json.RawMessage(`{"name":"x"}`)}, // the template needs .quiz
	)
	vs := s.SendBatch(t.Context(), ms)
	if len(vs) != len(ms) {
		t.Fatalf("%d verdicts for %d messages", len(vs), len(ms))
	}
	want := map[int64]struct {
		outcome sdk.Outcome
		code    string
		text    string
	}{
		8:    {sdk.OutcomePermanent, "3019", "not a KakaoTalk user"},
		9:    {sdk.OutcomePermanent, "3020", "blocked AlimTalk"},
		10:   {sdk.OutcomeTransient, "9999", "Kakao system problem"},
		13:   {sdk.OutcomePermanent, "-4019", "invalid recipient number"},
		14:   {sdk.OutcomeTransient, "-9999", "system error"},
		15:   {sdk.OutcomeTransient, "-4242", "not one this plugin knows"},
		16:   {sdk.OutcomePermanent, "CANCEL", "cancelled"},
		9000: {sdk.OutcomePermanent, "", `"not-a-number" is not a phone number`},
		9001: {sdk.OutcomePermanent, "-3010", "does not match the template"},
		9003: {sdk.OutcomePermanent, "", `no entry for key "quiz"`},
	}
	for i, v := range vs {
		w, special := want[ms[i].ID]
		if !special {
			w.outcome = sdk.OutcomeSuccess
		}
		if v.Outcome != w.outcome || v.ProviderCode != w.code || !strings.Contains(v.Detail, w.text) {
			t.Errorf("message %d (%s): got %v code %q %q, want %v code %q saying %q", ms[i].ID, ms[i].Recipient, v.Outcome, v.ProviderCode, v.Detail, w.outcome, w.code, w.text)
		}
		if w.outcome != sdk.OutcomeSuccess {
			continue
		}
		var r struct {
			Partner   string `json:"partner"`
			RequestID string `json:"request_id"`
			Seq       int    `json:"recipient_seq"`
			Code      string `json:"delivery_result_code"`
			Delivery  string `json:"delivery"`
		}
		wantCode, wantDelivery := "1000", ""
		if ms[i].ID == 12 {
			wantCode, wantDelivery = "3005", "unconfirmed"
		}
		if err := json.Unmarshal(v.Result, &r); err != nil || r.Partner != "nhn" || r.RequestID == "" || r.Seq == 0 || r.Code != wantCode || r.Delivery != wantDelivery {
			t.Errorf("message %d: result %s, want NHN Cloud's request id, recipientSeq, delivery code %s, delivery %q", ms[i].ID, v.Result, wantCode, wantDelivery)
		}
	}
	// 2,502 valid messages, one template: 1,000 + 1,000 + 502.
	sizes := f.Sizes()
	slices.Sort(sizes)
	if fmt.Sprint(sizes) != "[502 1000 1000]" {
		t.Errorf("request sizes %v, want [502 1000 1000]", sizes)
	}
	seen := 0
	for _, snd := range f.Sends() {
		if snd.SenderKey != nhnTestSenderKey || snd.TemplateCode != "daily_quiz" {
			t.Errorf("request for %s/%s", snd.SenderKey, snd.TemplateCode)
		}
		for _, rc := range snd.RecipientList {
			seen++
			if len(rc.Buttons) != 1 || rc.Buttons[0].LinkMo != "https://quiz.example.com/today" || rc.Buttons[0].Type != "WL" || rc.Buttons[0].Ordering != 1 {
				t.Errorf("buttons not sent as NHN Cloud's: %+v", rc.Buttons)
			}
			if rc.ResendParameter != nil {
				t.Errorf("a resendParameter without alimtalk.failover: %+v", rc.ResendParameter)
			}
			if strings.Trim(rc.RecipientNo, "0123456789") != "" {
				t.Errorf("recipientNo %q is not digits only", rc.RecipientNo)
			}
		}
	}
	plus82 := slices.ContainsFunc(f.Sends(), func(s nhnSent) bool {
		return slices.ContainsFunc(s.RecipientList, func(r nhnSentRecipient) bool { return r.RecipientNo == "01099990000" })
	})
	if seen != 2502 || !plus82 {
		t.Errorf("%d recipients sent (want 2502), or +82 10-9999-0000 not sent as 01099990000", seen)
	}
	nhnNoSecrets(t, logs, vs, nhnTestAppKey)

	// The retry of the Kakao fault is delivered.
	if v := s.Send(t.Context(), ms[byID(ms, 10)]); v.Outcome != sdk.OutcomeSuccess {
		t.Errorf("retry of a Kakao fault: got %v %q, want SUCCESS", v.Outcome, v.Detail)
	}
}

// TestNHN_RequestFailures: a refused or failed request, or an answer that
// is not NHN Cloud's, is the verdict of each message it carried.
func TestNHN_RequestFailures(t *testing.T) {
	t.Parallel()
	ok3 := `{"header":{"isSuccessful":true,"resultCode":0,"resultMessage":"SUCCESS"},"message":{"requestId":"R1","sendResults":[` +
		`{"recipientSeq":1,"recipientNo":"01000000000","resultCode":0,"resultMessage":"SUCCESS"},` +
		`{"recipientSeq":2,"recipientNo":"01000000001","resultCode":0,"resultMessage":"SUCCESS"}]}}`
	tests := []struct {
		name   string
		answer nhnFakeAnswer
		// per message: outcome, code, text
		want  []sdk.Outcome
		code  string
		text  string
		retry time.Duration
	}{
		{"system error", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":false,"resultCode":-9999,"resultMessage":"System error."}}`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "-9999", "NHN Cloud system error", 0},
		{"a code no document lists", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":false,"resultCode":-6543,"resultMessage":"new"}}`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "-6543", "not one this plugin knows", 0},
		{"invalid appkey", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":false,"resultCode":-1000,"resultMessage":"Invalid appKey."}}`},
			[]sdk.Outcome{sdk.OutcomePermanent}, "-1000", "check alimtalk.app_key", 0},
		{"template not approved", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":false,"resultCode":-3005,"resultMessage":"Please check template status."}}`},
			[]sdk.Outcome{sdk.OutcomePermanent}, "-3005", "not approved", 0},
		{"an error status with NHN Cloud's header", nhnFakeAnswer{400, nil, `{"header":{"isSuccessful":false,"resultCode":-3003,"resultMessage":"Template does not exist."}}`},
			[]sdk.Outcome{sdk.OutcomePermanent}, "-3003", "template does not exist", 0},
		{"throttled", nhnFakeAnswer{429, http.Header{"Retry-After": {"7"}}, `<html>slow down</html>`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "", "slow down", 7 * time.Second},
		{"throttled with a header", nhnFakeAnswer{429, http.Header{"Retry-After": {"9"}}, `{"header":{"isSuccessful":false,"resultCode":-9999,"resultMessage":"busy"}}`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "-9999", "busy", 9 * time.Second},
		{"a proxy page", nhnFakeAnswer{502, nil, `<html>bad gateway</html>`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "", "bad gateway", 0},
		{"unauthorized without a body", nhnFakeAnswer{401, nil, ``},
			[]sdk.Outcome{sdk.OutcomePermanent}, "", "check alimtalk.app_key and secret_key", 0},
		{"a 200 that is not JSON", nhnFakeAnswer{200, nil, `<html>gateway</html>`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "", "not its send result", 0},
		{"a 200 without a header", nhnFakeAnswer{200, nil, `{}`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "", "not its send result", 0},
		{"a 200 with the wrong types", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":{"yes":1}}}`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "", "not its send result", 0},
		// "yes" is read as true (looseBool): with no sendResults, looked up.
		{"isSuccessful a word, without sendResults", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":"yes"}}`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "", "no sendResults", 0},
		{"isSuccessful without sendResults", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":true,"resultCode":0}}`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "", "no sendResults", 0},
		{"two sendResults for three messages", nhnFakeAnswer{200, nil, ok3},
			[]sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomeSuccess, sdk.OutcomeTransient}, "", "", 0},
		{"a sendResult without a resultCode", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":true,"resultCode":0},"message":{"requestId":"R2","sendResults":[` +
			`{"recipientSeq":1,"recipientNo":"01000000000"},{"recipientSeq":2,"recipientNo":"01000000001","resultCode":0},{"recipientSeq":3,"recipientNo":"01000000002","resultCode":-3010,"resultMessage":"mismatch"}]}}`},
			[]sdk.Outcome{sdk.OutcomeTransient, sdk.OutcomeSuccess, sdk.OutcomePermanent}, "", "", 0},
		{"all recipients failed, each with its code", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":false,"resultCode":-1031,"resultMessage":"All of receivers are failed to send."},"message":{"requestId":"R3","sendResults":[` +
			`{"recipientSeq":1,"recipientNo":"01000000000","resultCode":-4019},{"recipientSeq":2,"recipientNo":"01000000001","resultCode":-9999},{"recipientSeq":3,"recipientNo":"01000000002","resultCode":-3010}]}}`},
			[]sdk.Outcome{sdk.OutcomePermanent, sdk.OutcomeTransient, sdk.OutcomePermanent}, "", "", 0},
		{"all recipients failed, no codes", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":false,"resultCode":-1031,"resultMessage":"All of receivers are failed to send."}}`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "-1031", "every recipient failed", 0},
		// A repeat (-1005) the list does not show: tried again when three
		// tries span the key's 10 minutes, not every minute (which ran out
		// the retry budget inside the window: dead-lettered, never sent).
		{"refused as a repeat, not listed", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":false,"resultCode":-1005,"resultMessage":"The same 'X-NC-API-IDEMPOTENCY-KEY' was used within the last 10 minute."}}`},
			[]sdk.Outcome{sdk.OutcomeTransient}, "-1005", "refused the request as a repeat", nhnKeyRetry},
		{"the secret echoed back", nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":false,"resultCode":-1001,"resultMessage":"Invalid secretKey ` + nhnTestSecret + `"}}`},
			[]sdk.Outcome{sdk.OutcomePermanent}, "-1001", "check alimtalk.secret_key", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeNHN(t)
			f.Script = []nhnFakeAnswer{tt.answer}
			s, logs := nhnSetup(t, f, map[string]any{"confirm": "accepted"})
			ms := quizMessages(3, phone)
			vs := s.SendBatch(t.Context(), ms)
			for i, v := range vs {
				want := tt.want[min(i, len(tt.want)-1)]
				if v.Outcome != want || (tt.code != "" && v.ProviderCode != tt.code) || !strings.Contains(v.Detail, tt.text) || v.RetryAfter != tt.retry {
					t.Errorf("message %d: got %v code %q retry %v %q, want %v code %q retry %v containing %q",
						i, v.Outcome, v.ProviderCode, v.RetryAfter, v.Detail, want, tt.code, tt.retry, tt.text)
				}
				if v.Outcome != sdk.OutcomeSuccess && v.Detail == "" {
					t.Errorf("message %d: %v without a detail", i, v.Outcome)
				}
			}
			if n := len(f.Sizes()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			nhnNoSecrets(t, logs, vs)
		})
	}

	for _, c := range []struct{ key, value, code, check string }{
		{"secret_key", "not-the-nhn-secret", "-1001", "alimtalk.secret_key"},
		{"app_key", "notTheAppKey", "-1000", "alimtalk.app_key"},
		{"sender_key", "not-the-sender-key", "-2017", "alimtalk.sender_key"},
	} {
		t.Run("wrong "+c.key, func(t *testing.T) {
			t.Parallel()
			f := newFakeNHN(t)
			s, logs := nhnSetup(t, f, map[string]any{c.key: c.value})
			vs := s.SendBatch(t.Context(), quizMessages(2, phone))
			for _, v := range vs {
				if v.Outcome != sdk.OutcomePermanent || v.ProviderCode != c.code || !strings.Contains(v.Detail, c.check) {
					t.Errorf("got %v %q %q, want PERMANENT %s naming %s", v.Outcome, v.ProviderCode, v.Detail, c.code, c.check)
				}
			}
			nhnNoSecrets(t, logs, vs, "not-the-nhn-secret")
		})
	}

	t.Run("unreachable partner", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		s, logs := nhnSetup(t, f, nil)
		f.srv.Close()
		vs := s.SendBatch(t.Context(), quizMessages(2, phone))
		for _, v := range vs {
			if v.Outcome != sdk.OutcomeTransient {
				t.Errorf("got %v %q, want TRANSIENT", v.Outcome, v.Detail)
			}
		}
		nhnNoSecrets(t, logs, vs, nhnTestAppKey)
	})
}

// TestNHN_Confirm: with confirm accepted no result is asked for; with
// delivered, a result never decided (or a list that cannot be read) leaves
// the message SUCCESS marked unconfirmed — never sent twice.
func TestNHN_Confirm(t *testing.T) {
	t.Parallel()
	t.Run("accepted", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		f.Undeliverable["01000000001"] = "3019"
		s, _ := nhnSetup(t, f, map[string]any{"confirm": "accepted"})
		for _, v := range s.SendBatch(t.Context(), quizMessages(3, phone)) {
			if v.Outcome != sdk.OutcomeSuccess || strings.Contains(string(v.Result), "delivery") {
				t.Errorf("got %v %s %q, want SUCCESS on acceptance", v.Outcome, v.Result, v.Detail)
			}
		}
		if f.Polls() != 0 {
			t.Errorf("%d result polls, want none", f.Polls())
		}
	})
	for _, c := range []struct {
		name  string
		setup func(f *fakeNHN)
	}{
		{"never decided", func(f *fakeNHN) { f.Never = true }},
		{"the list is garbage", func(f *fakeNHN) {
			for range 100 {
				f.ListScript = append(f.ListScript, nhnFakeAnswer{200, nil, `<html>`},
					nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":false,"resultCode":-9999}}`},
					nhnFakeAnswer{500, nil, `{"header":{"isSuccessful":true},"messageSearchResultResponse":{"messages":[{"recipientSeq":1,"messageStatus":"FAILED","resultCode":"3019"}]}}`},
					nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":true},"messageSearchResultResponse":{"messages":[{"recipientSeq":"one"}]}}`})
			}
		}},
		{"another request's results", func(f *fakeNHN) {
			for range 100 {
				f.ListScript = append(f.ListScript, nhnFakeAnswer{200, nil, `{"header":{"isSuccessful":true},"messageSearchResultResponse":{"totalCount":1,"messages":[` +
					`{"requestId":"someone-else","recipientSeq":1,"recipientNo":"01000000000","messageStatus":"FAILED","resultCode":"3019"},` +
					`{"recipientSeq":2,"recipientNo":"01099999999","messageStatus":"FAILED","resultCode":"3019"}]}}`})
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeNHN(t)
			f.Undeliverable["01000000000"] = "3019"
			f.Undeliverable["01000000001"] = "3019"
			c.setup(f)
			s, _ := nhnSetup(t, f, map[string]any{"confirm_wait": "300ms"})
			for _, v := range s.SendBatch(t.Context(), quizMessages(3, phone)) {
				if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), `"delivery":"unconfirmed"`) {
					t.Errorf("got %v %s %q, want SUCCESS marked unconfirmed", v.Outcome, v.Result, v.Detail)
				}
			}
			if f.Polls() == 0 {
				t.Error("no result polls")
			}
		})
	}

	t.Run("failover", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		f.Undeliverable["01000000000"] = "3019" // not a KakaoTalk user: the LMS delivers it
		f.FailoverDelivers["01000000000"] = true
		f.Undeliverable["01000000001"] = "3019" // the LMS fails too
		f.ProcessingPolls = 1
		cfg := nhnChannel(f, map[string]any{"failover": map[string]any{"type": "LMS", "from": "0212345678"}})
		delete(cfg, "template") // the payload is the message, with its failover text
		s, _ := nhnSetupChannel(t, cfg)
		ms := quizMessages(3, phone)
		for i := range ms {
			ms[i].Payload = json.RawMessage(`{"template_code":"daily_quiz","content":"민지님, 오늘의 퀴즈가 도착했어요: 수도는?","failover":{"subject":"오늘의 퀴즈","content":"퀴즈: 수도는?"}}`)
		}
		vs := s.SendBatch(t.Context(), ms)
		if v := vs[0]; v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), `"failover":"delivered"`) || !strings.Contains(string(v.Result), `"resend_status":"RSC04"`) {
			t.Errorf("AlimTalk failed, LMS delivered: got %v %s %q, want SUCCESS by failover", v.Outcome, v.Result, v.Detail)
		}
		if v := vs[1]; v.Outcome != sdk.OutcomePermanent || v.ProviderCode != "3019" || !strings.Contains(v.Detail, "failover failed too") {
			t.Errorf("both failed: got %v %q %q, want PERMANENT 3019 saying the failover failed", v.Outcome, v.ProviderCode, v.Detail)
		}
		if v := vs[2]; v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), `"delivery_result_code":"1000"`) {
			t.Errorf("delivered: got %v %s", v.Outcome, v.Result)
		}
		for _, snd := range f.Sends() {
			for _, rc := range snd.RecipientList {
				p := rc.ResendParameter
				if p == nil || !p.IsResend || p.ResendType != "LMS" || p.ResendSendNo != "0212345678" || p.ResendTitle != "오늘의 퀴즈" || p.ResendContent != "퀴즈: 수도는?" {
					t.Errorf("resendParameter %+v, want isResend LMS from 0212345678 with the message's subject and content", p)
				}
			}
		}
	})
}

// TestNHN_Config: every bad or misplaced key of an nhn channel is named.
func TestNHN_Config(t *testing.T) {
	t.Parallel()
	f := newFakeNHN(t)
	tests := []struct {
		name  string
		extra map[string]any
		key   string
	}{
		{"no app key", map[string]any{"app_key": nil}, "config.alimtalk.app_key: required with partner nhn"},
		{"no secret", map[string]any{"secret_key": nil}, "config.alimtalk.secret_key: required with partner nhn"},
		{"no sender key", map[string]any{"sender_key": nil}, "config.alimtalk.sender_key: required with partner nhn"},
		{"app key with a slash", map[string]any{"app_key": "a/b"}, "config.alimtalk.app_key: must not contain"},
		{"secret with a newline", map[string]any{"secret_key": nhnTestSecret + "\n"}, "config.alimtalk.secret_key: contains whitespace"},
		{"a SENS access key", map[string]any{"access_key": "ncp-access"}, "config.alimtalk.access_key: not used with partner nhn"},
		{"a SENS service id", map[string]any{"service_id": "ncp:kkobizmsg:kr:1:x"}, "config.alimtalk.service_id: not used with partner nhn"},
		{"a SENS channel id", map[string]any{"channel_id": "@x"}, "config.alimtalk.channel_id: not used with partner nhn"},
		{"another country", map[string]any{"country_code": "81"}, "config.alimtalk.country_code"},
		{"too many per request", map[string]any{"max_per_request": 1001}, "config.alimtalk.max_per_request"},
		{"bad failover", map[string]any{"failover": map[string]any{"type": "MMS", "from": "0212345678"}}, "config.alimtalk.failover.type"},
		{"relative api_url", map[string]any{"api_url": "kakaotalk-bizmessage.api.nhncloudservice.com"}, "config.alimtalk.api_url"},
	}
	for _, tt := range tests {
		raw, _ := json.Marshal(nhnChannel(f, tt.extra))
		_, err := (&provider{}).Configure(context.Background(), sdktest.ConfigureRequest(t, raw))
		var ce *ConfigError
		if err == nil || !strings.Contains(err.Error(), tt.key) || !errors.As(err, &ce) {
			t.Errorf("%s: got %v, want a config error naming %s", tt.name, err, tt.key)
		}
		if err != nil && strings.Contains(err.Error(), nhnTestSecret) {
			t.Errorf("%s: the error shows the secret key", tt.name)
		}
	}
	for _, extra := range []map[string]any{nil, {"max_per_request": 1000, "country_code": "82", "api_url": f.srv.URL + "/"}} {
		raw, _ := json.Marshal(nhnChannel(f, extra))
		s, err := (&provider{}).Configure(context.Background(), sdktest.ConfigureRequest(t, raw))
		if err != nil {
			t.Fatalf("%v: %v", extra, err)
		}
		at := s.(*alimtalkSender)
		if at.at.maxPerRequest != 1000 || at.partner.(*nhn).sendURL != f.srv.URL+"/alimtalk/v2.3/appkeys/"+nhnTestAppKey+"/raw-messages" {
			t.Errorf("%v: max_per_request %d, send URL %s", extra, at.at.maxPerRequest, at.partner.(*nhn).sendURL)
		}
	}
	if partners["nhn"].defaultURL != "https://kakaotalk-bizmessage.api.nhncloudservice.com" {
		t.Errorf("default URL %q", partners["nhn"].defaultURL)
	}
}

// TestNHN_Conformance runs the SDK's conformance suite over an AlimTalk
// channel with partner nhn against the fake.
func TestNHN_Conformance(t *testing.T) {
	t.Parallel()
	f := newFakeNHN(t)
	f.Undeliverable["01099990019"] = "3019"
	raw, _ := json.Marshal(nhnChannel(f, nil))
	payload := json.RawMessage(`{"name":"민지","quiz":"수도는?"}`)
	rep := sdktest.Run(t, &provider{}, sdktest.Features{
		Config: raw,
		Invalid: map[string]json.RawMessage{
			"no sender key":   json.RawMessage(`{"mode":"alimtalk","alimtalk":{"partner":"nhn","app_key":"a","secret_key":"s"}}`),
			"SENS keys mixed": json.RawMessage(`{"mode":"alimtalk","alimtalk":{"partner":"nhn","app_key":"a","secret_key":"s","sender_key":"k","access_key":"x"}}`),
		},
		Succeed:   sdk.Message{Recipient: "010-1234-0001", Payload: payload},
		Permanent: &sdk.Message{Recipient: "010-9999-0019", Payload: payload},
		Batch:     1100,
		// Four batches of this size at once against the fake: on a busy
		// machine that took past the 10 s default once (issue 28).
		Timeout: time.Minute,
	})
	if len(rep.Sent) == 0 {
		t.Fatal("nothing delivered")
	}
	for _, n := range f.Sizes() {
		if n > nhnMaxRecipients {
			t.Errorf("a request carried %d recipients", n)
		}
	}
}

// TestNHN_verdictsMatchByNumber: an answer out of order is matched by
// number; a number NHN Cloud does not list, or lists twice out of order, is
// never credited with another's result.
func TestNHN_verdictsMatchByNumber(t *testing.T) {
	t.Parallel()
	p := &nhn{c: &atConfig{}}
	ms := []*atMessage{{to: "0101"}, {to: "0102"}, {to: "0103"}, {to: "0104"}, {to: "0104"}, {to: "0106"}}
	var a nhnAnswer
	if err := json.Unmarshal([]byte(`{"header":{"isSuccessful":true},"message":{"requestId":"R1","sendResults":[
		{"recipientSeq":2,"recipientNo":"0102","resultCode":0},
		{"recipientSeq":1,"recipientNo":"0101","resultCode":0},
		{"recipientSeq":4,"recipientNo":"0104","resultCode":0},
		{"recipientSeq":5,"recipientNo":"0104","resultCode":0},
		{"recipientSeq":6,"recipientNo":"0106","resultCode":-4019}]}}`), &a); err != nil {
		t.Fatal(err)
	}
	vs, _ := p.verdicts(200, string(a.Message.RequestID), a.Message.SendResults, ms)
	for i, want := range []struct {
		outcome sdk.Outcome
		seq     string
	}{
		{sdk.OutcomeSuccess, "1"}, {sdk.OutcomeSuccess, "2"}, // matched by number
		{sdk.OutcomeTransient, ""},  // not listed
		{sdk.OutcomeSuccess, "5"},   // in place, and the number agrees
		{sdk.OutcomeTransient, ""},  // out of place, and its number is listed twice
		{sdk.OutcomePermanent, "6"}, // matched by number, refused
	} {
		if vs[i].Outcome != want.outcome || (want.seq != "" && !strings.Contains(string(vs[i].Result), `"recipient_seq":`+want.seq)) {
			t.Errorf("message %d: got %v %s %q, want %v seq %s", i, vs[i].Outcome, vs[i].Result, vs[i].Detail, want.outcome, want.seq)
		}
	}
}

// TestNHN_delivery: each documented state of the result list.
func TestNHN_delivery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status, code, resend string
		decided              bool
		outcome              sdk.Outcome
	}{
		{"COMPLETED", "1000", "RSC01", true, sdk.OutcomeSuccess},
		{"COMPLETED", "1000", "RSC02", true, sdk.OutcomeSuccess},
		{"READY", "", "RSC01", false, 0},
		{"", "", "", false, 0},
		{"COMPLETED", "", "RSC01", false, 0},
		{"FAILED", "", "RSC01", true, sdk.OutcomeTransient},
		{"FAILED", "4161", "RSC01", false, 0},
		{"FAILED", "3019", "RSC01", true, sdk.OutcomePermanent},
		{"FAILED", "3019", "RSC02", false, 0},
		{"FAILED", "3019", "RSC03", false, 0},
		{"FAILED", "3019", "RSC04", true, sdk.OutcomeSuccess},
		{"FAILED", "3019", "RSC05", true, sdk.OutcomePermanent},
		{"FAILED", "3005", "RSC01", true, sdk.OutcomeSuccess},
		{"FAILED", "9999", "RSC01", true, sdk.OutcomeTransient},
		{"FAILED", "7777", "RSC01", true, sdk.OutcomeSuccess}, // an unknown code: sent, unconfirmed, never sent again
		{"FAILED", "4001", "RSC01", true, sdk.OutcomeSuccess}, // status unknown
		{"CANCEL", "", "RSC01", true, sdk.OutcomePermanent},
	} {
		v, decided := nhnDelivery(c.status, c.code, "name", c.resend)
		if decided != c.decided || (decided && v.Outcome != c.outcome) {
			t.Errorf("%s %s %s: got %v decided %v (%q), want %v decided %v", c.status, c.code, c.resend, v.Outcome, decided, v.Detail, c.outcome, c.decided)
		}
	}
}

// TestNHN_Idempotency: every request carries X-NC-API-IDEMPOTENCY-KEY (and
// senderGroupingKey) derived from its notification ids, the same on every
// attempt, and each recipient its notification id as recipientGroupingKey;
// a request NHN Cloud accepted and then answered 500, or refused as a
// repeat (-1005), is credited from the list, never sent twice.
func TestNHN_Idempotency(t *testing.T) {
	t.Parallel()
	attempt := func(ms []sdk.Message, n int) []sdk.Message {
		out := slices.Clone(ms)
		for i := range out {
			out[i].Attempt = n
		}
		return out
	}
	t.Run("stable key", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		s, _ := nhnSetup(t, f, map[string]any{"confirm": "accepted"})
		f.Script = []nhnFakeAnswer{{Status: 503, Body: "<html>busy</html>"}} // not accepted
		ms := quizMessages(3, phone)
		if vs := s.SendBatch(t.Context(), ms); vs[0].Outcome != sdk.OutcomeTransient {
			t.Fatalf("a 503 the fake did not accept: %v %q, want TRANSIENT", vs[0].Outcome, vs[0].Detail)
		}
		slices.Reverse(ms) // the host may hand the same messages in another order
		for i, v := range s.SendBatch(t.Context(), attempt(ms, 2)) {
			if v.Outcome != sdk.OutcomeSuccess {
				t.Errorf("attempt 2, message %d: %v %q", ms[i].ID, v.Outcome, v.Detail)
			}
		}
		sends := f.Sends()
		if len(sends) != 2 || sends[0].SenderGroupingKey == "" || sends[0].SenderGroupingKey != sends[1].SenderGroupingKey {
			t.Fatalf("keys of the 2 attempts: %v, want one non-empty key twice", keysOf(sends))
		}
		if k := f.Keys(); len(k) != 1 || k[0] != sends[0].SenderGroupingKey {
			t.Errorf("X-NC-API-IDEMPOTENCY-KEY of the accepted request %v, want the senderGroupingKey %s", k, sends[0].SenderGroupingKey)
		}
		for _, rc := range sends[1].RecipientList {
			if id, _ := strconv.ParseInt(rc.RecipientGroupingKey, 10, 64); byID(ms, id) < 0 {
				t.Errorf("recipientGroupingKey %q is not a notification id of the request", rc.RecipientGroupingKey)
			}
		}
		// Other messages, another key.
		s.SendBatch(t.Context(), quizMessages(2, phone))
		if k := f.Keys(); len(k) != 2 || k[1] == k[0] {
			t.Errorf("a request of other messages reused key %v", k)
		}
	})
	for _, confirm := range []string{"accepted", "delivered"} {
		t.Run("500 after acceptance, confirm "+confirm, func(t *testing.T) {
			t.Parallel()
			f := newFakeNHN(t)
			s, _ := nhnSetup(t, f, map[string]any{"confirm": confirm})
			f.AcceptThenFail = 1
			ms := quizMessages(3, phone)
			for i, v := range s.SendBatch(t.Context(), ms) {
				if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), "reconciled") {
					t.Errorf("message %d accepted then answered 500: %v %q %s, want SENT, reconciled", ms[i].ID, v.Outcome, v.Detail, v.Result)
				}
			}
			if n := len(f.Keys()); n != 1 {
				t.Errorf("%d accepted requests, want 1", n)
			}
		})
	}
	// A timeout after NHN Cloud took the request: the POST ends a reserve
	// before the deadline, and the reconcile that follows finds the
	// messages in the list within it. (The POST once used the whole
	// deadline, the reconcile's GETs failed at once on the spent context,
	// and the retry sent them again.)
	t.Run("timeout after acceptance", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		s, _ := nhnSetup(t, f, map[string]any{"confirm": "accepted"})
		f.AcceptThenHang = 1
		ms := quizMessages(3, phone)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second) // a reserve of 750 ms
		defer cancel()
		for i, v := range s.SendBatch(ctx, ms) {
			if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), "reconciled") {
				t.Errorf("message %d accepted, then no answer: %v %q %s, want SENT, reconciled", ms[i].ID, v.Outcome, v.Detail, v.Result)
			}
		}
		if ctx.Err() != nil {
			t.Errorf("the verdicts came after the deadline")
		}
	})
	t.Run("key already used", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		s, _ := nhnSetup(t, f, nil)
		f.Flaky["01000000002"] = true // its AlimTalk fails once (9999)
		ms := quizMessages(3, phone)
		first := s.SendBatch(t.Context(), ms)
		if first[0].Outcome != sdk.OutcomeSuccess || first[2].Outcome != sdk.OutcomeTransient {
			t.Fatalf("first attempt: %v, %v; want SENT, and TRANSIENT for the flaky one", first[0].Outcome, first[2].Outcome)
		}
		// The host sends all three again (say the first answer was lost):
		// NHN Cloud refuses the repeat with -1005.
		vs := s.SendBatch(t.Context(), attempt(ms, 2))
		for i, v := range vs[:2] {
			if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), "reconciled") {
				t.Errorf("message %d after -1005: %v %q %s, want SENT from the list", ms[i].ID, v.Outcome, v.Detail, v.Result)
			}
		}
		// The one whose delivery failed waits out the key's 10 minutes.
		if v := vs[2]; v.Outcome != sdk.OutcomeTransient || v.RetryAfter < 10*time.Minute {
			t.Errorf("the flaky one after -1005: %v after %v %q, want TRANSIENT after ≥ 10m", v.Outcome, v.RetryAfter, v.Detail)
		}
		if n := len(f.Keys()); n != 1 {
			t.Errorf("%d accepted requests, want 1", n)
		}
	})
}

func keysOf(sends []nhnSent) []string {
	var k []string
	for _, s := range sends {
		k = append(k, s.SenderGroupingKey)
	}
	return k
}

// TestNHN_ListFormattedNumber: NHN Cloud's list may write recipientNo as
// +82 10-…, as its send answer may (TestSENS_verdictsMatchFormattedNumbers);
// both are read the same way. The list was compared on its digits only
// (821000000001 is not 01000000001) and credited nothing: after a lost
// answer the accepted messages were retried (sent twice once the key's 10
// minutes were over), and with confirm a delivery that failed transiently
// (9999) was reported SENT, never retried.
func TestNHN_ListFormattedNumber(t *testing.T) {
	t.Parallel()
	formatted := func(f *fakeNHN) *httptest.Server {
		return rewriting(t, f, func(r *http.Request, status int, body []byte) []byte {
			if r.Method != http.MethodGet {
				return body
			}
			var l map[string]any
			if json.Unmarshal(body, &l) != nil {
				return body
			}
			if res, ok := l["messageSearchResultResponse"].(map[string]any); ok {
				msgs, _ := res["messages"].([]any)
				for _, m := range msgs {
					if m, ok := m.(map[string]any); ok {
						if no, ok := m["recipientNo"].(string); ok && len(no) == 11 {
							m["recipientNo"] = "+82 " + no[1:3] + "-" + no[3:7] + "-" + no[7:]
						}
					}
				}
			}
			out, _ := json.Marshal(l)
			return out
		})
	}
	t.Run("reconcile after a 500", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		s, _ := nhnSetup(t, f, map[string]any{"confirm": "accepted", "api_url": formatted(f).URL})
		f.AcceptThenFail = 1
		ms := quizMessages(3, phone)
		for i, v := range s.SendBatch(t.Context(), ms) {
			if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), "reconciled") {
				t.Errorf("message %d accepted then answered 500, listed as +82 …: %v %q, want SENT, reconciled", ms[i].ID, v.Outcome, v.Detail)
			}
		}
	})
	t.Run("confirm", func(t *testing.T) {
		t.Parallel()
		f := newFakeNHN(t)
		f.Flaky["01000000001"] = true // Kakao's 9999: retried
		s, _ := nhnSetup(t, f, map[string]any{"confirm_wait": "2s", "api_url": formatted(f).URL})
		vs := s.SendBatch(t.Context(), quizMessages(3, phone))
		if v := vs[1]; v.Outcome != sdk.OutcomeTransient || v.ProviderCode != "9999" {
			t.Errorf("delivery failed with 9999, listed as +82 …: %v %s %q, want TRANSIENT 9999", v.Outcome, v.Result, v.Detail)
		}
		for _, i := range []int{0, 2} {
			if v := vs[i]; v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), `"delivery_result_code":"1000"`) {
				t.Errorf("message %d delivered, listed as +82 …: %v %s, want SENT with its delivery result", i, v.Outcome, v.Result)
			}
		}
	})
}

// TestNHN_ShortAnswerReconciled: NHN Cloud took every message of a request
// but its answer lists one fewer in sendResults, or has none. The unlisted
// messages are looked up in the list by the request's key, as after a lost
// answer, and found SENT; the request is confirmed once. They were retried
// at once without the lookup, and the host's retry (the message alone, so
// another idempotency key) sent them again.
func TestNHN_ShortAnswerReconciled(t *testing.T) {
	t.Parallel()
	for _, drop := range []string{"the last sendResult", "sendResults"} {
		for _, confirm := range []string{"accepted", "delivered"} {
			t.Run(drop+", "+confirm, func(t *testing.T) {
				t.Parallel()
				f := newFakeNHN(t)
				front := rewriting(t, f, func(r *http.Request, status int, body []byte) []byte {
					if r.Method != http.MethodPost || status/100 != 2 {
						return body
					}
					var a map[string]any
					if json.Unmarshal(body, &a) != nil {
						return body
					}
					if m, ok := a["message"].(map[string]any); ok {
						if res, ok := m["sendResults"].([]any); ok && len(res) > 1 {
							m["sendResults"] = res[:len(res)-1]
							if drop == "sendResults" {
								delete(m, "sendResults")
							}
						}
					}
					out, _ := json.Marshal(a)
					return out
				})
				s, logs := nhnSetup(t, f, map[string]any{"confirm": confirm, "api_url": front.URL})
				vs := s.SendBatch(t.Context(), quizMessages(3, phone))
				for i, v := range vs {
					if v.Outcome != sdk.OutcomeSuccess || !strings.Contains(string(v.Result), fmt.Sprintf(`"recipient_seq":%d`, i+1)) {
						t.Errorf("message %d: %v %q %s, want SENT as its own recipientSeq", i, v.Outcome, v.Detail, v.Result)
					}
					if confirm == "delivered" && !strings.Contains(string(v.Result), `"delivery_result_code":"1000"`) {
						t.Errorf("message %d: result %s, want its delivery result", i, v.Result)
					}
				}
				if !strings.Contains(string(vs[2].Result), "reconciled") {
					t.Errorf("the message the answer left out: result %s, want it reconciled", vs[2].Result)
				}
				if want := map[string]int{"accepted": 1, "delivered": 2}[confirm]; f.Polls() != want {
					t.Errorf("%d list requests, want %d (one lookup, one poll of the whole request)", f.Polls(), want)
				}
				if n := len(f.Sends()); n != 1 {
					t.Errorf("%d send requests, want 1", n)
				}
				nhnNoSecrets(t, logs, vs)
				if v := f.Violations(); len(v) > 0 {
					t.Errorf("the fake saw violations: %v", v)
				}
			})
		}
	}
}

// TestNHN_EntryWithoutResultCodeReconciled: NHN Cloud answered a request
// isSuccessful, listing every recipient, one of them without its resultCode
// (left out or null). That entry says nothing of the message: it was
// retried at once, alone (another idempotency key), and sent twice. It
// goes through the list lookup an unlisted message gets, and is found SENT.
func TestNHN_EntryWithoutResultCodeReconciled(t *testing.T) {
	t.Parallel()
	for _, shape := range []string{"left out", "null"} {
		t.Run(shape, func(t *testing.T) {
			t.Parallel()
			f := newFakeNHN(t)
			front := rewriting(t, f, func(r *http.Request, status int, body []byte) []byte {
				if r.Method != http.MethodPost || status/100 != 2 {
					return body
				}
				var a map[string]any
				if json.Unmarshal(body, &a) != nil {
					return body
				}
				if m, ok := a["message"].(map[string]any); ok {
					if res, ok := m["sendResults"].([]any); ok && len(res) > 1 {
						e := res[1].(map[string]any)
						if shape == "null" {
							e["resultCode"] = nil
						} else {
							delete(e, "resultCode")
						}
					}
				}
				out, _ := json.Marshal(a)
				return out
			})
			s, logs := nhnSetup(t, f, map[string]any{"confirm": "accepted", "api_url": front.URL})
			vs := s.SendBatch(t.Context(), quizMessages(3, phone))
			for i, v := range vs {
				if v.Outcome != sdk.OutcomeSuccess {
					t.Errorf("message %d: %v %q, want SENT (NHN Cloud accepted it)", i, v.Outcome, v.Detail)
				}
			}
			if !strings.Contains(string(vs[1].Result), "reconciled") {
				t.Errorf("the entry without a resultCode: result %s, want it reconciled from the list", vs[1].Result)
			}
			if n := len(f.Sends()); n != 1 {
				t.Errorf("%d send requests, want 1", n)
			}
			nhnNoSecrets(t, logs, vs)
		})
	}
}
