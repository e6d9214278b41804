package main

// NHN Cloud KakaoTalk Bizmessage, the AlimTalk API v2.3:
//
//	POST {api_url}/alimtalk/v2.3/appkeys/{appkey}/raw-messages   send the full text
//	GET  {api_url}/alimtalk/v2.3/appkeys/{appkey}/messages?requestId=…   list the results
//
// https://docs.nhncloud.com/en/Notification/KakaoTalk%20Bizmessage/en/alimtalk-api-guide/
// (request, response, list; v2.3 is the current guide)
// https://docs.nhncloud.com/en/Notification/KakaoTalk%20Bizmessage/en/error-code/
// (API response codes, delivery result codes)
//
// raw-messages takes each recipient's rendered content and buttons, as SENS
// does, so a channel moves between the partners without a payload change.
// The other send API (…/messages) would take template parameters instead.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

const (
	nhnDefaultURL = "https://kakaotalk-bizmessage.api.nhncloudservice.com"
	// nhnMaxRecipients is the documented maximum of recipientList.
	nhnMaxRecipients = 1000
	// Delivery result codes (resultCode of the list) the plugin branches on.
	nhnDelivered  = "1000" // success
	nhnProcessing = "4161" // message being processed
	// nhnPageSize is the list page the plugin asks for. The list carries
	// each message's content (up to 1,300 characters), so a page of the
	// documented maximum of 1,000 could pass the answer limit.
	nhnPageSize = 200
	// nhnListPages bounds the pages one reconcile or poll reads: 1,200
	// entries, past the 1,000 of one request. Past it a reconcile does not
	// know a message's fate (reconcile).
	nhnListPages = nhnMaxRecipients/nhnPageSize + 1
)

// nhn is the NHN Cloud partner of one channel.
type nhn struct {
	c       *atConfig
	client  *http.Client
	now     func() time.Time
	sendURL string
	listURL string
	// pollEvery is the first wait before asking for delivery results; each
	// later wait is one pollEvery longer. Tests shorten it.
	pollEvery time.Duration
}

func newNHN(c *atConfig, client *http.Client, now func() time.Time) partner {
	u, _ := url.Parse(c.apiURL) // validated by baseURL
	// app_key holds no / ? # or % (checked): it is one path segment.
	base := strings.TrimRight(u.Path, "/") + "/alimtalk/v2.3/appkeys/" + c.appKey
	u.Path = base + "/raw-messages"
	send := u.String()
	u.Path = base + "/messages"
	return &nhn{c: c, client: client, now: now, sendURL: send, listURL: u.String(), pollEvery: 500 * time.Millisecond}
}

// secrets: the secret key, and the appkey, which is in every URL an error
// may quote.
func (p *nhn) secrets() []string { return []string{p.c.secretKey, p.c.appKey} }

// nhnRequest is the documented raw-messages body (the fields the plugin
// sends).
type nhnRequest struct {
	SenderKey    string `json:"senderKey"`
	TemplateCode string `json:"templateCode"`
	// SenderGroupingKey is the request's idempotency key: the list finds
	// the request by it when its answer was lost.
	SenderGroupingKey string         `json:"senderGroupingKey,omitempty"`
	RecipientList     []nhnRecipient `json:"recipientList"`
}

type nhnRecipient struct {
	RecipientNo     string      `json:"recipientNo"`
	Content         string      `json:"content"`
	TemplateTitle   string      `json:"templateTitle,omitempty"`
	TemplateHeader  string      `json:"templateHeader,omitempty"`
	Buttons         []nhnButton `json:"buttons,omitempty"`
	ResendParameter *nhnResend  `json:"resendParameter,omitempty"`
	// RecipientGroupingKey is the notification id: the list credits an
	// entry to its message by it.
	RecipientGroupingKey string `json:"recipientGroupingKey,omitempty"`
}

type nhnButton struct {
	Ordering      int    `json:"ordering"`
	Type          string `json:"type"`
	Name          string `json:"name"`
	LinkMo        string `json:"linkMo,omitempty"`
	LinkPc        string `json:"linkPc,omitempty"`
	SchemeIos     string `json:"schemeIos,omitempty"`
	SchemeAndroid string `json:"schemeAndroid,omitempty"`
}

// nhnResend is the SMS/LMS failover of one recipient.
type nhnResend struct {
	IsResend      bool   `json:"isResend"`
	ResendType    string `json:"resendType,omitempty"`
	ResendTitle   string `json:"resendTitle,omitempty"`
	ResendContent string `json:"resendContent,omitempty"`
	ResendSendNo  string `json:"resendSendNo,omitempty"`
}

// NHN Cloud's answers (the send's and the list's) are read field by field
// whatever each field's JSON type, as SENS's are: a code or a count as an
// integer in a number or a string (kakaoCode), a text as its JSON text
// (kakaoText), isSuccessful true only as true, "true" or "Y" (looseBool),
// an object or a list of another type as absent (lenient, nhnArray). They
// were decoded whole into typed fields, and one field of another type (a
// resultCode "0", a recipientSeq "1", a totalCount "3") threw the whole
// answer away: a send answer became "not its send result" and, with the
// list not showing the request yet, every message NHN Cloud had accepted
// was retried (under another idempotency key once regrouped: sent twice);
// a list page ended the lookup, and the same happened.

// nhnHeader is the header of every answer. Pointers tell a missing field
// from a zero one.
type nhnHeader struct {
	ResultCode    *kakaoCode `json:"resultCode"`
	ResultMessage kakaoText  `json:"resultMessage"`
	IsSuccessful  *looseBool `json:"isSuccessful"`
}

func (h *nhnHeader) UnmarshalJSON(raw []byte) error {
	type fields nhnHeader
	return lenient(raw, (*fields)(h))
}

// successful reports the header's isSuccessful (false when it has none).
func (h *nhnHeader) successful() bool { return h.IsSuccessful != nil && bool(*h.IsSuccessful) }

// code is the header's resultCode, when it has one that is an integer.
func (h *nhnHeader) code() (int, bool) { return nhnInt(h.ResultCode) }

// refusal reports whether the header says NHN Cloud refused the request:
// isSuccessful false (or another value that is not true) with a resultCode
// that is an integer other than 0. One that says false beside no code, a
// code that is no integer or 0 (success) says nothing clear, and is read as
// an answer without NHN Cloud's header: a 2xx or 5xx is reconciled, never
// retried blind, since NHN Cloud may have taken the request.
func (h *nhnHeader) refusal() bool {
	c, ok := h.code()
	return ok && c != 0
}

// nhnAnswer is the documented answer of a send.
type nhnAnswer struct {
	Header  *nhnHeader      `json:"header"`
	Message *nhnSendMessage `json:"message"`
}

type nhnSendMessage struct {
	RequestID   kakaoText               `json:"requestId"`
	SendResults nhnArray[nhnSendResult] `json:"sendResults"`
}

func (m *nhnSendMessage) UnmarshalJSON(raw []byte) error {
	type fields nhnSendMessage
	return lenient(raw, (*fields)(m))
}

type nhnSendResult struct {
	RecipientSeq  *kakaoCode `json:"recipientSeq"`
	RecipientNo   kakaoText  `json:"recipientNo"`
	ResultCode    *kakaoCode `json:"resultCode"`
	ResultMessage kakaoText  `json:"resultMessage"`
}

func (r *nhnSendResult) UnmarshalJSON(raw []byte) error {
	type fields nhnSendResult
	return lenient(raw, (*fields)(r))
}

// lenient decodes raw into v, a struct of fields that read any JSON type,
// when raw is a JSON object; any other value leaves v as it is, every
// field absent. It never fails, so one object of another type costs only
// itself, never the answer around it.
func lenient(raw []byte, v any) error {
	_ = json.Unmarshal(raw, v)
	return nil
}

// nhnArray is a list of an NHN Cloud answer: absent (nil) when the value is
// no JSON array (an object, a string, null); each element read as lenient
// reads it.
type nhnArray[T any] []T

func (a *nhnArray[T]) UnmarshalJSON(raw []byte) error {
	var v []T
	if json.Unmarshal(raw, &v) != nil {
		v = nil
	}
	*a = v
	return nil
}

// nhnInt is an integer field of NHN Cloud's answers, when it is one
// (kakaoCode: in a number or a string, within int32).
func nhnInt(c *kakaoCode) (int, bool) {
	if c == nil || !c.ok {
		return 0, false
	}
	return c.n, true
}

// nhnSeq is a recipientSeq, when it is one: an integer from 1 to the
// 1,000 recipients of a request. Any other (0, negative, past a request,
// no integer) names no recipient; it was kept, and two entries of one
// wrong seq shared one delivery result in the poll.
func nhnSeq(c *kakaoCode) (int, bool) {
	n, ok := nhnInt(c)
	return n, ok && n >= 1 && n <= nhnMaxRecipients
}

// nhnIdempotencyKey is a request's X-NC-API-IDEMPOTENCY-KEY (and its
// senderGroupingKey): a hash of the template code and the sorted
// notification ids, so a request rebuilt from the same messages on a later
// attempt carries the same key, and NHN Cloud refuses it (-1005) within 10
// minutes of the first instead of sending it twice. A retry that groups
// the messages differently gets another key (README: the duplicate window).
func nhnIdempotencyKey(templateCode string, ms []*atMessage) string {
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.id
	}
	slices.Sort(ids)
	h := sha256.New()
	h.Write([]byte(templateCode))
	for _, id := range ids {
		h.Write([]byte("\x00" + strconv.FormatInt(id, 10)))
	}
	return "notifyd-" + hex.EncodeToString(h.Sum(nil))[:40]
}

// nhnKeyUsed is the answer to a request whose idempotency key was used
// within the last 10 minutes: the request went out before.
const nhnKeyUsed = -1005

// nhnKeyWindow is how long NHN Cloud refuses a used idempotency key.
const nhnKeyWindow = 10 * time.Minute

// nhnKeyRetry is when a message refused as a repeat (-1005) that the list
// does not show yet is tried again: each try reconciles from the list, and
// three of them span the key's window, so the default retry budget (5
// attempts) still has a try after it, when NHN Cloud takes the request
// again if it never sent it. Every minute (as it was), the budget ran out
// inside the window and the message was dead-lettered, never sent.
const nhnKeyRetry = nhnKeyWindow/3 + 20*time.Second

func (p *nhn) send(ctx context.Context, templateCode string, ms []*atMessage) []sdk.Verdict {
	key := nhnIdempotencyKey(templateCode, ms)
	started := p.now()
	body := nhnRequest{SenderKey: p.c.senderKey, TemplateCode: templateCode, SenderGroupingKey: key, RecipientList: make([]nhnRecipient, len(ms))}
	for i, m := range ms {
		r := nhnRecipient{RecipientNo: m.to, Content: m.p.Content, TemplateTitle: m.p.Title, TemplateHeader: m.p.Header,
			RecipientGroupingKey: strconv.FormatInt(m.id, 10)}
		for k, b := range m.p.Buttons {
			r.Buttons = append(r.Buttons, nhnButton{
				Ordering: k + 1, Type: b.Type, Name: b.Name, LinkMo: b.LinkMobile, LinkPc: b.LinkPc,
				SchemeIos: b.SchemeIos, SchemeAndroid: b.SchemeAndroid,
			})
		}
		if p.c.failoverType != "" {
			r.ResendParameter = &nhnResend{IsResend: true, ResendType: p.c.failoverType, ResendSendNo: p.c.failoverFrom}
			if f := m.p.Failover; f != nil {
				r.ResendParameter.ResendTitle, r.ResendParameter.ResendContent = f.Subject, f.Content
			}
		}
		body.RecipientList[i] = r
	}
	resp, answer, fail := postAnswer(ctx, p.client, "NHN Cloud", p.sendURL, body, func(h http.Header) {
		h.Set("Content-Type", "application/json;charset=UTF-8")
		h.Set("X-Secret-Key", p.c.secretKey)
		h.Set("X-NC-API-IDEMPOTENCY-KEY", key)
	})
	if fail != nil {
		// The request may have reached NHN Cloud before it failed.
		return p.reconcile(ctx, key, started, ms, everyone(len(ms), *fail), true)
	}
	var a nhnAnswer
	if json.Unmarshal(answer, &a) != nil || a.Header == nil || a.Header.IsSuccessful == nil ||
		(!a.Header.successful() && !a.Header.refusal()) {
		v := p.notAnswer(resp, answer)
		if resp.StatusCode >= 500 || resp.StatusCode/100 == 2 || resp.StatusCode < 200 {
			// A 5xx or a garbled 2xx may follow an accepted request; a
			// 1xx is no answer at all.
			return p.reconcile(ctx, key, started, ms, everyone(len(ms), v), true)
		}
		return everyone(len(ms), v)
	}
	if c, _ := a.Header.code(); !a.Header.successful() && c == nhnKeyUsed {
		// The same messages went out in a request of the last 10 minutes
		// (an answer lost, a timeout): credit each from the list, never
		// send again.
		v := sdk.Transient(fmt.Sprintf("NHN Cloud refused the request as a repeat (resultCode %d, the X-NC-API-IDEMPOTENCY-KEY was used within 10 minutes), and its list does not show the message yet", nhnKeyUsed)).
			WithStatus(resp.StatusCode).WithCode(strconv.Itoa(nhnKeyUsed)).WithRetryAfter(nhnKeyRetry)
		return p.reconcile(ctx, key, started.Add(-nhnKeyWindow), ms, everyone(len(ms), v), true)
	}
	requestID := ""
	var results []nhnSendResult
	if a.Message != nil {
		requestID, results = string(a.Message.RequestID), a.Message.SendResults
	}
	if !a.Header.successful() {
		// "All recipients failed" comes with each recipient's own code:
		// those say more than the request's.
		if c, _ := a.Header.code(); nhnAllFailed[c] && len(results) == len(ms) {
			vs, _ := p.verdicts(resp.StatusCode, requestID, results, ms)
			return vs
		}
		return everyone(len(ms), p.refused(resp, a.Header))
	}
	var vs []sdk.Verdict
	var unlisted []int
	if results == nil {
		vs = everyone(len(ms), sdk.Transient(fmt.Sprintf("NHN Cloud answered HTTP %d isSuccessful with no sendResults: %s",
			resp.StatusCode, clean(string(answer)))).WithStatus(resp.StatusCode))
		for i := range ms {
			unlisted = append(unlisted, i)
		}
	} else {
		vs, unlisted = p.verdicts(resp.StatusCode, requestID, results, ms)
	}
	// NHN Cloud took the request but did not say so for these: the list
	// says whether it took them, the whole request then confirmed once.
	reconcileUnlisted(ms, vs, unlisted, func(sub []*atMessage, failed []sdk.Verdict) []sdk.Verdict {
		return p.reconcile(ctx, key, started, sub, failed, false)
	})
	if requestID == "" {
		// The answer named no request; the list does, for what it credited.
		for _, v := range vs {
			if id, _ := resultOf(v)["request_id"].(string); id != "" {
				requestID = id
				break
			}
		}
	}
	if p.c.confirm {
		p.confirm(ctx, requestID, ms, vs)
	}
	return vs
}

// notAnswer is the verdict of every message of a request whose answer has
// no NHN Cloud header: by HTTP status, and a 2xx is retried (the send may
// not have happened).
func (p *nhn) notAnswer(resp *http.Response, answer []byte) sdk.Verdict {
	if resp.StatusCode/100 == 2 {
		return sdk.Transient(fmt.Sprintf("NHN Cloud answered HTTP %d with a body that is not its send result: %s",
			resp.StatusCode, clean(string(answer)))).WithStatus(resp.StatusCode)
	}
	resp.Body = http.NoBody
	v := sdk.ClassifyHTTP(resp, nil)
	detail := fmt.Sprintf("NHN Cloud refused the request: HTTP %d", resp.StatusCode)
	if msg := clean(string(answer)); msg != "" {
		detail += ": " + msg
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		detail += " (check alimtalk.app_key and secret_key)"
	case http.StatusNotFound:
		detail += " (check alimtalk.app_key and api_url)"
	}
	v.Detail = detail
	return v
}

// refused is the verdict of every message of a request NHN Cloud answered
// isSuccessful false.
func (p *nhn) refused(resp *http.Response, h *nhnHeader) sdk.Verdict {
	v := classifyNHN("NHN Cloud refused the request", h.ResultCode, string(h.ResultMessage)).WithStatus(resp.StatusCode)
	if v.Outcome == sdk.OutcomeTransient {
		v = v.WithRetryAfter(sdk.RetryAfter(resp.Header, p.now()))
	}
	return v
}

// verdicts classifies each recipient's resultCode, matched to its
// message by matchAnswers (a reordered or short answer never credits one
// recipient with another's result); unlisted are the messages the answer
// does not list once, or lists without a resultCode.
func (p *nhn) verdicts(status int, requestID string, res []nhnSendResult, ms []*atMessage) (vs []sdk.Verdict, unlisted []int) {
	vs = make([]sdk.Verdict, len(ms))
	numbers := make([]string, len(res))
	for k, r := range res {
		numbers[k] = echoedNumber(string(r.RecipientNo), countryOf(ms))
	}
	for i, k := range matchAnswers(numbers, ms) {
		if k < 0 {
			vs[i] = sdk.Transient(fmt.Sprintf("NHN Cloud answered request %s (HTTP %d) but its sendResults do not list %s once", requestID, status, maskNumber(ms[i].to))).WithStatus(status)
			unlisted = append(unlisted, i)
			continue
		}
		r := res[k]
		code, ok := nhnInt(r.ResultCode)
		if !ok {
			// An entry without its resultCode (or with one that is no
			// integer) says nothing of the message: as an unlisted one, it
			// is looked up in the list, never retried blind (alone, it
			// would carry another key).
			vs[i] = sdk.Transient(fmt.Sprintf("NHN Cloud answered request %s (HTTP %d) but its sendResults list %s without a resultCode it can read", requestID, status, maskNumber(ms[i].to))).WithStatus(status)
			unlisted = append(unlisted, i)
			continue
		}
		result := map[string]any{"partner": "nhn", "request_id": requestID, "result_code": code}
		if seq, ok := nhnSeq(r.RecipientSeq); ok {
			result["recipient_seq"] = seq
		}
		raw, _ := json.Marshal(result)
		if code == 0 {
			vs[i] = sdk.Success(raw).WithStatus(status)
			continue
		}
		vs[i] = classifyNHN("NHN Cloud did not accept the message", r.ResultCode, string(r.ResultMessage)).WithStatus(status).WithResult(raw)
	}
	return vs, unlisted
}

// reconcile looks the request up in the list by its idempotency key (its
// senderGroupingKey), sent since `since`, and credits each message whose
// notification id (its recipientGroupingKey) is listed: NHN Cloud accepted
// it, so it is SENT — and with confirm, judged by its delivery result like
// any other (a delivery that failed transiently waits out the key's 10
// minutes). A message not listed keeps failed, its verdict so far.
// confirm is false when the request was answered but left ms out: the
// caller confirms the whole request once.
func (p *nhn) reconcile(ctx context.Context, key string, since time.Time, ms []*atMessage, failed []sdk.Verdict, confirm bool) []sdk.Verdict {
	vs := slices.Clone(failed)
	byID := make(map[string]int, len(ms))
	for i, m := range ms {
		byID[strconv.FormatInt(m.id, 10)] = i
	}
	q := url.Values{
		"senderGroupingKey": {key},
		"startRequestDate":  {since.Add(-time.Minute).In(kst).Format("2006-01-02 15:04")},
		"endRequestDate":    {p.now().Add(2 * time.Minute).In(kst).Format("2006-01-02 15:04")},
		"pageSize":          {strconv.Itoa(nhnPageSize)},
	}
	requestID, found := "", 0
	// more: a page read says the list goes on past it.
	more := false
	for page := 1; page <= nhnListPages; page++ {
		q.Set("pageNum", strconv.Itoa(page))
		var l nhnList
		if !p.get(ctx, "?"+q.Encode(), &l) || l.Body == nil {
			break
		}
		for _, r := range l.Body.Messages {
			i, ok := byID[string(r.RecipientGroupingKey)]
			if !ok || (r.SenderGroupingKey != "" && string(r.SenderGroupingKey) != key) ||
				(r.RecipientNo != "" && echoedNumber(string(r.RecipientNo), ms[i].country) != ms[i].to) || vs[i].Outcome == sdk.OutcomeSuccess {
				// Not this request's message: never credit another's. The
				// number is read as the send answer's (+82 10-… is 010…):
				// compared on its digits, a formatted list credited nothing.
				continue
			}
			// Listed under the request's key by its notification id: NHN
			// Cloud took it, whatever its recipientSeq reads as (an entry
			// without one was skipped, and the message sent again; without
			// it, the delivery poll cannot find it: "unconfirmed").
			result := map[string]any{"partner": "nhn", "request_id": string(r.RequestID), "reconciled": "listed by its idempotency key"}
			if seq, ok := nhnSeq(r.RecipientSeq); ok {
				result["recipient_seq"] = seq
			}
			raw, _ := json.Marshal(result)
			vs[i] = sdk.Success(raw).WithStatus(http.StatusOK)
			requestID = string(r.RequestID)
			found++
		}
		if more = l.Body.more(page); !more || found == len(ms) {
			break
		}
	}
	if more && found < len(ms) {
		// Not read to its end: a message not found may be on a page not
		// read (the key listed more than once, a list without totalCount).
		unknownFate(ms, vs, nil, "nhn", fmt.Sprintf("NHN Cloud's list by the request's key goes on past the %d entries read", nhnListPages*nhnPageSize))
	}
	if found > 0 && p.c.confirm && confirm {
		p.confirm(ctx, requestID, ms, vs)
		for i, v := range vs {
			if v.Outcome == sdk.OutcomeTransient && failed[i].ProviderCode == strconv.Itoa(nhnKeyUsed) {
				// Sent again now, it would meet -1005 again.
				vs[i].RetryAfter = max(v.RetryAfter, nhnKeyWindow)
			}
		}
	}
	return vs
}

// more reports whether the list goes on past page (pages of nhnPageSize):
// a full page, and a totalCount past it or none. A list without totalCount
// ended at its first page (page×size ≥ 0), its later pages never read.
// A totalCount that is no positive integer (a string that is none, past
// int32, negative) is no count: the list is followed while full, within
// nhnListPages.
func (b *nhnListBody) more(page int) bool {
	total, ok := nhnInt(b.TotalCount)
	return len(b.Messages) >= nhnPageSize && (!ok || total <= 0 || page*nhnPageSize < total)
}

// nhnList is a page of the message list (GET …/messages?requestId=, or by
// senderGroupingKey over a request date range).
type nhnList struct {
	Header *nhnHeader   `json:"header"`
	Body   *nhnListBody `json:"messageSearchResultResponse"`
}

// nhnListBody is the list page's messages and count.
type nhnListBody struct {
	Messages   nhnArray[nhnListEntry] `json:"messages"`
	TotalCount *kakaoCode             `json:"totalCount"`
}

func (b *nhnListBody) UnmarshalJSON(raw []byte) error {
	type fields nhnListBody
	return lenient(raw, (*fields)(b))
}

// nhnListEntry is one message of the list.
type nhnListEntry struct {
	RequestID            kakaoText  `json:"requestId"`
	SenderGroupingKey    kakaoText  `json:"senderGroupingKey"`
	RecipientGroupingKey kakaoText  `json:"recipientGroupingKey"`
	RecipientSeq         *kakaoCode `json:"recipientSeq"`
	RecipientNo          kakaoText  `json:"recipientNo"`
	MessageStatus        kakaoText  `json:"messageStatus"`
	ResultCode           kakaoText  `json:"resultCode"`
	ResultCodeName       kakaoText  `json:"resultCodeName"`
	ResendStatus         kakaoText  `json:"resendStatus"`
}

func (e *nhnListEntry) UnmarshalJSON(raw []byte) error {
	type fields nhnListEntry
	return lenient(raw, (*fields)(e))
}

// confirm waits, within confirm_wait and the batch's deadline, for Kakao's
// delivery result of each recipient NHN Cloud accepted, and turns the ones
// Kakao did not deliver into their own verdicts. A message whose result is
// still unknown when the wait ends stays SUCCESS — NHN Cloud accepted it,
// and sending it again could deliver it twice — with "unconfirmed" in its
// result.
func (p *nhn) confirm(ctx context.Context, requestID string, ms []*atMessage, vs []sdk.Verdict) {
	pending := map[int]int{} // recipientSeq → index
	for i, v := range vs {
		var r struct {
			Seq *int `json:"recipient_seq"`
		}
		if v.Outcome == sdk.OutcomeSuccess && json.Unmarshal(v.Result, &r) == nil && r.Seq != nil {
			pending[*r.Seq] = i
		}
	}
	if len(pending) > 0 && requestID != "" {
		pollDelivery(ctx, p.now, p.c.confirmWait, p.pollEvery, func() bool { return len(pending) == 0 },
			func() { p.poll(ctx, requestID, ms, pending, vs) })
	}
	for i, v := range vs {
		if v.Outcome != sdk.OutcomeSuccess {
			continue
		}
		var r map[string]any
		if json.Unmarshal(v.Result, &r) == nil && r["delivery"] == nil && r["delivery_result_code"] == nil {
			r["delivery"] = "unconfirmed"
			vs[i].Result, _ = json.Marshal(r)
		}
	}
}

// poll reads the request's result list once and settles the messages whose
// delivery Kakao (or the SMS/LMS failover) has decided.
func (p *nhn) poll(ctx context.Context, requestID string, ms []*atMessage, pending map[int]int, vs []sdk.Verdict) {
	for page := 1; page <= nhnListPages && len(pending) > 0; page++ {
		q := url.Values{"requestId": {requestID}, "pageNum": {strconv.Itoa(page)}, "pageSize": {strconv.Itoa(nhnPageSize)}}
		var l nhnList
		if !p.get(ctx, "?"+q.Encode(), &l) || l.Body == nil {
			return // an error or nothing yet: the next poll asks again
		}
		for _, r := range l.Body.Messages {
			seq, ok := nhnSeq(r.RecipientSeq)
			if !ok {
				continue
			}
			i, ok := pending[seq]
			if !ok || (r.RequestID != "" && string(r.RequestID) != requestID) || (r.RecipientNo != "" && echoedNumber(string(r.RecipientNo), ms[i].country) != ms[i].to) {
				continue // not this request's recipient (its number read as in reconcile): never credit another's result
			}
			v, decided := nhnDelivery(string(r.MessageStatus), string(r.ResultCode), string(r.ResultCodeName), string(r.ResendStatus))
			if !decided {
				continue
			}
			delete(pending, seq)
			var result map[string]any
			_ = json.Unmarshal(vs[i].Result, &result)
			if result == nil {
				result = map[string]any{}
			}
			result["message_status"] = string(r.MessageStatus)
			if r.ResultCode != "" {
				result["delivery_result_code"] = string(r.ResultCode)
			}
			if r.ResendStatus != "" {
				result["resend_status"] = string(r.ResendStatus)
			}
			if v.Outcome == sdk.OutcomeSuccess {
				for k, val := range resultOf(v) {
					result[k] = val
				}
				vs[i].Result, _ = json.Marshal(result)
				continue
			}
			raw, _ := json.Marshal(result)
			vs[i] = v.WithStatus(vs[i].ProviderStatus).WithResult(raw)
		}
		if !l.Body.more(page) {
			return
		}
	}
}

// digitsOf is a phone number as NHN Cloud may write it (separators
// included), digits only.
func digitsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r < '0' || r > '9' {
			return -1
		}
		return r
	}, s)
}

// resultOf is a verdict's result as a map (nil when it has none).
func resultOf(v sdk.Verdict) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(v.Result, &m)
	return m
}

// nhnDelivery is the verdict of one entry of the result list, and whether
// it is decided. messageStatus is documented as COMPLETED, FAILED or
// CANCEL; any other (a message not yet sent) is undecided, and so is a
// result that the SMS/LMS failover may still change.
func nhnDelivery(status, code, name, resend string) (sdk.Verdict, bool) {
	switch {
	case code == nhnDelivered:
		return sdk.Verdict{Outcome: sdk.OutcomeSuccess}, true
	case status == "CANCEL":
		return sdk.Permanent("NHN Cloud reports the message cancelled (messageStatus CANCEL, by the console or the cancel API): it was not sent").WithCode("CANCEL"), true
	case status != "COMPLETED" && status != "FAILED":
		return sdk.Verdict{}, false
	case code == "" || code == nhnProcessing:
		if status == "FAILED" && code == "" {
			return sdk.Transient("NHN Cloud reports the message FAILED with no delivery result code").WithCode("FAILED"), true
		}
		return sdk.Verdict{}, false
	case resend == "RSC04":
		// AlimTalk failed, the SMS/LMS failover delivered it.
		r, _ := json.Marshal(map[string]any{"failover": "delivered"})
		return sdk.Success(r), true
	case resend == "RSC02" || resend == "RSC03":
		return sdk.Verdict{}, false // the failover is on its way
	case code == kakaoUnconfirmed:
		// Kakao sent it and could not confirm receipt; sending again could
		// deliver it twice.
		r, _ := json.Marshal(map[string]any{"delivery": "unconfirmed"})
		return sdk.Success(r), true
	}
	v := classifyDelivery(code, name)
	if resend == "RSC05" {
		v.Detail += "; the SMS/LMS failover failed too"
	}
	return v.WithCode(code), true
}

// get sends a GET of the list endpoint with query and decodes a 2xx
// answer whose header says isSuccessful into out.
func (p *nhn) get(ctx context.Context, query string, out *nhnList) bool {
	return getAnswer(ctx, p.client, p.listURL+query, func(h http.Header) { h.Set("X-Secret-Key", p.c.secretKey) }, out) &&
		out.Header != nil && out.Header.successful()
}

// nhnCode is what one of NHN Cloud's API result codes means to a message.
type nhnCode struct {
	transient bool
	reason    string
	check     string // the config key or field to check, if any
}

// nhnAllFailed are the request codes that say every recipient failed; the
// recipients' own codes are in sendResults.
var nhnAllFailed = map[int]bool{-1031: true, -2999: true}

// nhnCodes classifies NHN Cloud's API response codes (the error-code page,
// "API Response Code"), at the request and per recipient. Final: the
// request or the message is wrong and is refused again as it is;
// transient: NHN Cloud's or Kakao's fault. A code not listed is retried,
// with NHN Cloud's words.
var nhnCodes = map[int]nhnCode{
	4:     {reason: "parameter validation failed"},
	-1000: {reason: "invalid appkey", check: "alimtalk.app_key"},
	-1001: {reason: "invalid secret key", check: "alimtalk.secret_key"},
	-1002: {reason: "invalid SMS appkey (the SMS service used for failover)", check: "the SMS service linked for alimtalk.failover"},
	-1003: {reason: "invalid SMS sender number", check: "alimtalk.failover.from: it must be registered in NHN Cloud's SMS service"},
	// -1005 answers a request whose X-NC-API-IDEMPOTENCY-KEY was used in
	// the last 10 minutes: send reconciles it through the list (already
	// sent). Met per recipient, it is retried after the key's window.
	-1005: {transient: true, reason: "the X-NC-API-IDEMPOTENCY-KEY was used within the last 10 minutes: the request went out before"},
	-1006: {reason: "the sender profile has no senderKey", check: "alimtalk.sender_key"},
	-1014: {reason: "the sender profile is not activated", check: "alimtalk.sender_key"},
	-1017: {transient: true, reason: "the daily sending volume is exceeded"},
	-1019: {reason: "invalid 080 opt-out number for the failover", check: "alimtalk.failover"},
	-1020: {reason: "invalid UUID"},
	-1024: {reason: "a sender profile group cannot send messages", check: "alimtalk.sender_key"},
	-1027: {reason: "the sender profile is blocked", check: "alimtalk.sender_key"},
	-1028: {reason: "a template variable differs from the template by more than 14 characters (first-time user limit)"},
	-1030: {reason: "identity verification is required to use the service (NHN Cloud console)"},
	-2000: {reason: "a field is too long"},
	-2001: {reason: "a required field is blank"},
	-2002: {reason: "a required field is null"},
	-2003: {reason: "a field is too short"},
	-2004: {reason: "a field is out of its length range"},
	-2005: {reason: "a field is out of its range"},
	-2017: {reason: "no such sender profile", check: "alimtalk.sender_key"},
	-2018: {reason: "invalid button parameter"},
	-2019: {reason: "the content is over 1,300 characters"},
	-2032: {reason: "the title is over 50 characters"},
	-2033: {reason: "invalid template item parameter"},
	// The current table's codes below were read only in part (README, NHN
	// Cloud's codes): they sit in its field-validation (-2000…) and
	// template-check (-3000…) and failover-setting (-2500…) families, which
	// the request as built always meets again; NHN Cloud's resultMessage
	// says which field.
	-2034: {reason: "a field is invalid (field validation, NHN Cloud's error table)"},
	-2035: {reason: "the header is over 16 characters"},
	-2036: {reason: "a field is invalid (field validation, NHN Cloud's error table)"},
	-2504: {reason: "the failover (resend) request is invalid (NHN Cloud's error table)", check: "alimtalk.failover and the console's failover setting"},
	-3048: {reason: "the message does not match the template (template check, NHN Cloud's error table)"},
	-3051: {reason: "the message does not match the template (template check, NHN Cloud's error table)"},
	-3052: {reason: "the message does not match the template (template check, NHN Cloud's error table)"},
	-3053: {reason: "the message does not match the template (template check, NHN Cloud's error table)"},
	-3324: {reason: "the recipient or template cannot be sent to (NHN Cloud's error table)"},
	-2502: {reason: "failover was requested but the sender profile has no failover (resend) setting", check: "the failover setting in NHN Cloud's console, or alimtalk.failover"},
	-3000: {reason: "a WL button needs linkMo"},
	-3002: {reason: "the request body cannot be read"},
	-3003: {reason: "the template does not exist", check: "the message's template_code or alimtalk.template_code"},
	-3004: {reason: "template parameter error"},
	-3005: {reason: "the template is not approved", check: "the message's template_code or alimtalk.template_code"},
	-3006: {reason: "linkMo/linkPc must start with http:// or https://"},
	-3007: {reason: "an AL button needs two of schemeAndroid, schemeIos, linkMo"},
	-3008: {reason: "a button name cannot hold a variable"},
	-3009: {reason: "a button has no name"},
	-3010: {reason: "the content does not match the template"},
	-3011: {reason: "the buttons do not match the template"},
	-3033: {reason: "a button is not in the template"},
	-3042: {reason: "the header does not match the template"},
	-3043: {reason: "the item list or item highlight does not match the template"},
	-3046: {reason: "the main link does not match the template"},
	-3049: {reason: "the template parameters do not match the template"},
	-3301: {reason: "the recipient opted out"},
	-4000: {reason: "invalid parameter"},
	-4004: {reason: "the appkey does not exist", check: "alimtalk.app_key"},
	-4005: {reason: "the appkey is disabled", check: "alimtalk.app_key (is KakaoTalk Bizmessage enabled in the project?)"},
	-4019: {reason: "invalid recipient number"},
	-4200: {reason: "invalid failover message", check: "the message's failover subject and content"},
	-5000: {reason: "invalid recipient number"},
	-7000: {transient: true, reason: "the request to Kakao failed"},
	-8008: {reason: "the content has a banned word"},
	-9996: {reason: "the request is not application/json"},
	-9997: {reason: "client error"},
	-9998: {reason: "no such API", check: "alimtalk.api_url"},
	-9999: {transient: true, reason: "NHN Cloud system error"},
	-1031: {transient: true, reason: "every recipient failed (NHN Cloud gave no recipient's reason)"},
	-2999: {transient: true, reason: "every recipient failed (NHN Cloud gave no recipient's reason)"},
}

// classifyNHN is the verdict of an NHN Cloud result code other than 0.
func classifyNHN(what string, code *kakaoCode, msg string) sdk.Verdict {
	if code == nil {
		return sdk.Transient(fmt.Sprintf("%s with no resultCode (%s)", what, clean(msg)))
	}
	if !code.ok {
		return sdk.Transient(fmt.Sprintf("%s: resultCode %s (%s), not one this plugin knows", what, code.text(), clean(msg)))
	}
	c := strconv.Itoa(code.n)
	info, known := nhnCodes[code.n]
	if !known {
		return sdk.Transient(fmt.Sprintf("%s: resultCode %s (%s), not one this plugin knows", what, c, clean(msg))).WithCode(c)
	}
	detail := fmt.Sprintf("%s: resultCode %s: %s (%s)", what, c, info.reason, clean(msg))
	if info.check != "" {
		detail += "; check " + info.check
	}
	if info.transient {
		return sdk.Transient(detail).WithCode(c)
	}
	return sdk.Permanent(detail).WithCode(c)
}
