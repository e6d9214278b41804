package main

// NAVER Cloud Platform SENS (Simple & Easy Notification Service), the
// AlimTalk send API:
//
//	POST {api_url}/alimtalk/v2/services/{serviceId}/messages
//
// https://api.ncloud-docs.com/docs/en/sens-alimtalk-send (request, response)
// https://api.ncloud-docs.com/docs/en/sens-overview (headers, signature)
// https://api.ncloud-docs.com/docs/en/common-ncpapi (API Gateway errors)

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

const (
	sensDefaultURL = "https://sens.apigw.ntruss.com"
	// sensMaxMessages is SENS's documented maximum of messages per request.
	sensMaxMessages = 100
	// sensAccepted is the requestStatusCode of a message SENS accepted.
	sensAccepted = "A000"
	// sensDelivered is the messageStatusCode of a message Kakao delivered.
	sensDelivered = "0000"
	// kakaoUnconfirmed is Kakao's delivery code for a message it sent and
	// could not confirm the receipt of (a result may follow within 3 days):
	// delivered as far as anyone can tell, never sent again.
	kakaoUnconfirmed = "3005"
	// sensListPages bounds the result list pages (of 100) one reconcile
	// reads: 2,000 entries of the channel's template in the request's
	// minutes. Past it a message's fate is not known (reconcile).
	sensListPages = 20
)

// sens is the SENS partner of one channel.
type sens struct {
	c      *atConfig
	client *http.Client
	now    func() time.Time
	url    string // the send endpoint
	uri    string // its path as signed
	// pollEvery is the first wait before asking for delivery results; each
	// later wait is one pollEvery longer. Tests shorten it.
	pollEvery time.Duration
}

func newSENS(c *atConfig, client *http.Client, now func() time.Time) partner {
	u, _ := url.Parse(c.apiURL) // validated by baseURL
	// service_id holds no / ? # or % (checked): it is one path segment, and
	// its colons go on the wire and into the signature as they are.
	u.Path = strings.TrimRight(u.Path, "/") + "/alimtalk/v2/services/" + c.serviceID + "/messages"
	return &sens{c: c, client: client, now: now, url: u.String(), uri: u.EscapedPath(), pollEvery: 500 * time.Millisecond}
}

func (p *sens) secrets() []string { return []string{p.c.secretKey, p.c.accessKey} }

// sensRequest is the documented request body.
type sensRequest struct {
	PlusFriendID string        `json:"plusFriendId"`
	TemplateCode string        `json:"templateCode"`
	Messages     []sensMessage `json:"messages"`
}

type sensMessage struct {
	CountryCode    string        `json:"countryCode,omitempty"`
	To             string        `json:"to"`
	Title          string        `json:"title,omitempty"`
	Content        string        `json:"content"`
	HeaderContent  string        `json:"headerContent,omitempty"`
	Buttons        []atButton    `json:"buttons,omitempty"`
	UseSmsFailover *bool         `json:"useSmsFailover,omitempty"`
	FailoverConfig *sensFailover `json:"failoverConfig,omitempty"`
}

type sensFailover struct {
	Type    string `json:"type,omitempty"`
	From    string `json:"from,omitempty"`
	Subject string `json:"subject,omitempty"`
	Content string `json:"content,omitempty"`
}

// sensAnswer is the documented response body of an accepted request. Each
// field is read whatever its JSON type (kakaoText, looseBool): one of
// another type threw the whole answer away, and with the list not showing
// the request yet, the messages SENS had accepted were sent again.
type sensAnswer struct {
	RequestID   kakaoText `json:"requestId"`
	RequestTime kakaoText `json:"requestTime"`
	StatusCode  kakaoText `json:"statusCode"`
	StatusName  kakaoText `json:"statusName"`
	Messages    []struct {
		MessageID         kakaoText `json:"messageId"`
		CountryCode       kakaoText `json:"countryCode"`
		To                kakaoText `json:"to"`
		RequestStatusCode kakaoText `json:"requestStatusCode"`
		RequestStatusName kakaoText `json:"requestStatusName"`
		RequestStatusDesc kakaoText `json:"requestStatusDesc"`
		UseSmsFailover    looseBool `json:"useSmsFailover"`
	} `json:"messages"`
}

// looseBool is a flag of a partner's answer read whatever JSON it comes as:
// true, or a string saying so ("true", "Y"); anything else is false. Its
// reading never fails the answer's.
type looseBool bool

func (b *looseBool) UnmarshalJSON(raw []byte) error {
	var t kakaoText
	_ = t.UnmarshalJSON(raw)
	switch strings.ToLower(strings.TrimSpace(string(t))) {
	case "true", "y", "yes", "1":
		*b = true
	default:
		*b = false
	}
	return nil
}

// sensError is an error answer: the API Gateway's {"error": {…}} or SENS's
// own {"status", "errorMessage"}.
type sensError struct {
	Error *struct {
		ErrorCode string `json:"errorCode"`
		Message   string `json:"message"`
		Details   string `json:"details"`
	} `json:"error"`
	Status       json.Number `json:"status"`
	ErrorMessage string      `json:"errorMessage"`
	StatusName   string      `json:"statusName"`
}

// sign is SENS's x-ncp-apigw-signature-v2: base64(HMAC-SHA256(secret key,
// "METHOD URI\nTIMESTAMP\nACCESS_KEY")).
func sign(secret, method, uri, timestamp, accessKey string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(method + " " + uri + "\n" + timestamp + "\n" + accessKey))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func (p *sens) send(ctx context.Context, templateCode string, ms []*atMessage) []sdk.Verdict {
	body := sensRequest{PlusFriendID: p.c.channelID, TemplateCode: templateCode, Messages: make([]sensMessage, len(ms))}
	for i, m := range ms {
		sm := sensMessage{
			CountryCode: m.country, To: m.to, Title: m.p.Title, Content: m.p.Content,
			HeaderContent: m.p.Header, Buttons: m.p.Buttons,
		}
		if p.c.failoverType != "" {
			on := true
			sm.UseSmsFailover = &on
			sm.FailoverConfig = &sensFailover{Type: p.c.failoverType, From: p.c.failoverFrom}
			if f := m.p.Failover; f != nil {
				sm.FailoverConfig.Subject, sm.FailoverConfig.Content = f.Subject, f.Content
			}
		}
		body.Messages[i] = sm
	}
	started := p.now()
	resp, answer, fail := postAnswer(ctx, p.client, "SENS", p.url, body, func(h http.Header) {
		ts := strconv.FormatInt(p.now().UnixMilli(), 10)
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("x-ncp-apigw-timestamp", ts)
		h.Set("x-ncp-iam-access-key", p.c.accessKey)
		h.Set("x-ncp-apigw-signature-v2", sign(p.c.secretKey, http.MethodPost, p.uri, ts, p.c.accessKey))
	})
	if fail != nil {
		// The request may have reached SENS before it failed.
		return p.reconcile(ctx, templateCode, started, ms, everyone(len(ms), *fail), nil)
	}
	if resp.StatusCode/100 != 2 {
		v := p.failed(resp, answer)
		if resp.StatusCode >= 500 || resp.StatusCode < 200 {
			// A 5xx may follow an accepted request; a 1xx is no answer.
			return p.reconcile(ctx, templateCode, started, ms, everyone(len(ms), v), nil)
		}
		return everyone(len(ms), v)
	}
	var a sensAnswer
	if err := json.Unmarshal(answer, &a); err != nil || a.Messages == nil {
		return p.reconcile(ctx, templateCode, started, ms, everyone(len(ms), sdk.Transient(fmt.Sprintf("SENS answered HTTP %d with a body that is not its send result: %s",
			resp.StatusCode, clean(string(answer)))).WithStatus(resp.StatusCode)), nil)
	}
	vs, unlisted := p.verdicts(resp.StatusCode, &a, ms)
	reconcileUnlisted(ms, vs, unlisted, func(sub []*atMessage, failed []sdk.Verdict) []sdk.Verdict {
		return p.reconcile(ctx, templateCode, started, sub, failed, &a)
	})
	if p.c.confirm {
		p.confirm(ctx, string(a.RequestID), ms, vs)
	}
	return vs
}

// reconcile asks the result list, before a request that failed without an
// answer (a timeout, a 5xx, a garbled 2xx) is retried, whether SENS took
// it anyway. SENS returns no requestId then, and echoes no field of the
// caller's choosing, so the list is read by channel, template and request
// time (from a minute before the POST, in KST) and a listed message is
// credited to a message of the request only by the same number and the
// same content, each listed message once. A credited message is SENT (and
// with confirm, judged by its delivery result); the rest keep failed.
//
// answered is SENS's answer when it accepted the request but left ms out
// (nil after a failure): a listed message it names, or one of another
// request, is never credited to them, and the caller confirms the whole
// request once.
func (p *sens) reconcile(ctx context.Context, templateCode string, started time.Time, ms []*atMessage, failed []sdk.Verdict, answered *sensAnswer) []sdk.Verdict {
	vs := slices.Clone(failed)
	q := url.Values{
		"plusFriendId":     {p.c.channelID},
		"templateCode":     {templateCode},
		"requestStartTime": {started.Add(-time.Minute).In(kst).Format("2006-01-02 15:04:05")},
		"requestEndTime":   {p.now().Add(time.Minute).In(kst).Format("2006-01-02 15:04:05")},
		"pageSize":         {"100"},
	}
	used := map[string]bool{}
	if answered != nil {
		for _, m := range answered.Messages {
			if m.RequestStatusCode != "" { // one without is looked up here
				used[string(m.MessageID)] = true
			}
		}
	}
	requestID, found, next := "", 0, ""
	refused := make([]bool, len(ms))
	for page := 0; page < sensListPages && found < len(ms); page++ {
		if next != "" {
			q.Set("nextToken", next)
		}
		var res sensResults
		if !p.get(ctx, "?"+q.Encode(), &res) {
			break
		}
		for _, r := range res.Messages {
			if r.MessageID == "" || used[r.MessageID] || r.Content == "" ||
				(answered != nil && answered.RequestID != "" && r.RequestID != "" && r.RequestID != string(answered.RequestID)) {
				continue
			}
			to := echoedNumber(r.To, countryOf(ms))
			// Listed with a requestStatusCode other than A000, SENS did not
			// accept it: it never went out. Credited, it was SENT and
			// lost; its verdict is SENS's refusal, as in an answer (a
			// later entry SENS accepted still credits the message).
			notAccepted := r.RequestStatusCode != "" && r.RequestStatusCode != sensAccepted
			for i, m := range ms {
				if vs[i].Outcome == sdk.OutcomeSuccess || to != m.to || r.Content != m.p.Content || (notAccepted && refused[i]) {
					continue
				}
				used[r.MessageID] = true
				if notAccepted {
					refused[i] = true
					vs[i] = classifyRequestStatus(r.RequestStatusCode, r.RequestStatusName, r.RequestStatusDesc).
						WithStatus(failed[i].ProviderStatus).WithCode(r.RequestStatusCode)
					break
				}
				raw, _ := json.Marshal(map[string]any{"partner": "sens", "request_id": r.RequestID, "message_id": r.MessageID,
					"reconciled": "listed with the same number and content after the request failed"})
				vs[i] = sdk.Success(raw).WithStatus(http.StatusAccepted)
				requestID = r.RequestID
				found++
				break
			}
		}
		if next = res.NextToken; next == "" {
			break
		}
	}
	if next != "" {
		// The list goes on past what was read (the bound, or a page that
		// failed after one that said there is more): a message not found
		// may be on a page not read. Retried, it went out twice.
		unknownFate(ms, vs, refused, "sens", fmt.Sprintf("SENS's result list goes on past the %d entries read", sensListPages*100))
	}
	if found > 0 && p.c.confirm && answered == nil {
		p.confirm(ctx, requestID, ms, vs)
	}
	return vs
}

// unknownFate turns the verdict of each message of ms a reconcile could not
// establish (not credited from the list; skip[i], when set, says the list
// settled it otherwise) into SENT, "delivery":"unconfirmed": the list was
// not read to its end, so the partner may have taken it, and a retry would
// send it twice (SENS has no idempotency key; NHN Cloud's holds only for
// the same grouping within 10 minutes). It is what the plugin answers for
// any message that may have gone out and whose outcome is not known
// (Kakao's 4000/4001, a failover not reported): never sent again, its
// detail saying why, so an operator can find it.
func unknownFate(ms []*atMessage, vs []sdk.Verdict, skip []bool, partner, why string) {
	for i := range ms {
		if vs[i].Outcome == sdk.OutcomeSuccess || (skip != nil && skip[i]) {
			continue
		}
		raw, _ := json.Marshal(map[string]any{"partner": partner, "delivery": "unconfirmed",
			"reconciled": "unknown: " + why + "; the request may have been taken, so it is not sent again"})
		v := sdk.Success(raw).WithStatus(vs[i].ProviderStatus)
		v.Detail = fmt.Sprintf("%s, and it was not found in what was read: kept as sent, unconfirmed (the request failed: %s)", why, vs[i].Detail)
		vs[i] = v
	}
}

// verdicts classifies each message's requestStatusCode, matched to its
// message by matchAnswers (a reordered or short answer never credits one
// recipient with another's result); unlisted are the messages the answer
// does not list once, or lists without a requestStatusCode.
func (p *sens) verdicts(status int, a *sensAnswer, ms []*atMessage) (vs []sdk.Verdict, unlisted []int) {
	vs = make([]sdk.Verdict, len(ms))
	numbers := make([]string, len(a.Messages))
	for k, r := range a.Messages {
		numbers[k] = echoedNumber(string(r.To), countryOf(ms))
	}
	for i, k := range matchAnswers(numbers, ms) {
		if k < 0 {
			vs[i] = sdk.Transient(fmt.Sprintf("SENS accepted request %s (HTTP %d) but its answer does not list %s once", a.RequestID, status, maskNumber(ms[i].to))).WithStatus(status)
			unlisted = append(unlisted, i)
			continue
		}
		r := a.Messages[k]
		if r.RequestStatusCode == "" {
			// An entry without its status says nothing of the message
			// (SENS documents the field as required): as an unlisted one,
			// it is looked up in the list, never retried blind.
			vs[i] = sdk.Transient(fmt.Sprintf("SENS accepted request %s (HTTP %d) but its answer lists %s without a requestStatusCode", a.RequestID, status, maskNumber(ms[i].to))).WithStatus(status)
			unlisted = append(unlisted, i)
			continue
		}
		result, _ := json.Marshal(map[string]any{
			"partner": "sens", "request_id": a.RequestID, "message_id": r.MessageID,
			"request_status_code": r.RequestStatusCode, "use_sms_failover": r.UseSmsFailover,
		})
		if r.RequestStatusCode == sensAccepted {
			vs[i] = sdk.Success(result).WithStatus(status)
			continue
		}
		v := classifyRequestStatus(string(r.RequestStatusCode), string(r.RequestStatusName), string(r.RequestStatusDesc))
		vs[i] = v.WithStatus(status).WithCode(string(r.RequestStatusCode)).WithResult(result)
	}
	return vs, unlisted
}

// sensResults is a page of SENS's result list (GET …/messages?requestId=).
type sensResults struct {
	Messages []struct {
		MessageID         string `json:"messageId"`
		To                string `json:"to"`
		MessageStatusCode string `json:"messageStatusCode"`
		MessageStatusName string `json:"messageStatusName"`
		MessageStatusDesc string `json:"messageStatusDesc"`
		RequestID         string `json:"requestId"`
		Content           string `json:"content"`
		// RequestStatusCode is A000 for a message SENS accepted; any
		// other code is a message it refused, which never went out.
		RequestStatusCode string `json:"requestStatusCode"`
		RequestStatusName string `json:"requestStatusName"`
		RequestStatusDesc string `json:"requestStatusDesc"`
		// The SMS/LMS failover of a message Kakao did not deliver.
		UseSmsFailover     bool   `json:"useSmsFailover"`
		FailoverStatus     string `json:"failoverStatus"`
		FailoverStatusName string `json:"failoverStatusName"`
		FailoverStatusDesc string `json:"failoverStatusDesc"`
	} `json:"messages"`
	NextToken string `json:"nextToken"`
}

// failover is what the result list says of a message's SMS/LMS failover:
// "delivered", "failed", or "" (none asked for, or not known yet).
func failoverOutcome(status, name string) string {
	switch strings.ToUpper(strings.TrimSpace(status + " " + name)) {
	case "":
		return ""
	}
	for _, f := range []string{status, name} {
		switch strings.ToLower(f) {
		case "success", "0000", "completed", "delivered":
			return "delivered"
		case "fail", "failed", "failure":
			return "failed"
		}
	}
	return ""
}

// confirm waits, within confirm_wait and the batch's deadline, for Kakao's
// delivery result of each message SENS accepted, and turns the ones Kakao
// did not deliver into their own verdicts: an unknown number or a blocked
// channel is dead-lettered, a Kakao fault retried. A message whose result is
// still unknown when the wait ends stays SUCCESS — SENS accepted it, and
// sending it again could deliver it twice — with "unconfirmed" in its
// result.
//
// pending is by messageId, and an entry of the list settles a message only
// with its number: with two messages given one messageId, the first list
// entry with it settled whichever message held it last, so one took the
// other's delivery result.
func (p *sens) confirm(ctx context.Context, requestID string, ms []*atMessage, vs []sdk.Verdict) {
	pending := map[string][]int{} // messageId → indexes
	for i, v := range vs {
		var r struct {
			MessageID string `json:"message_id"`
		}
		if v.Outcome == sdk.OutcomeSuccess && json.Unmarshal(v.Result, &r) == nil && r.MessageID != "" {
			pending[r.MessageID] = append(pending[r.MessageID], i)
		}
	}
	if len(pending) == 0 || requestID == "" {
		return
	}
	pollDelivery(ctx, p.now, p.c.confirmWait, p.pollEvery, func() bool { return len(pending) == 0 },
		func() { p.poll(ctx, requestID, ms, pending, vs) })
	for _, idxs := range pending {
		for _, i := range idxs {
			var r map[string]any
			if json.Unmarshal(vs[i].Result, &r) == nil {
				r["delivery"] = "unconfirmed"
				vs[i].Result, _ = json.Marshal(r)
			}
		}
	}
}

// claim takes from pending the message an entry of the list with messageId
// id and number to is about: the one of id's with that number, or, when
// the entry has no number, id's only one. -1 when there is none.
func claim(pending map[string][]int, ms []*atMessage, id, to string) int {
	idxs := pending[id]
	at := -1
	for k, i := range idxs {
		if (to == "" && len(idxs) == 1) || (to != "" && echoedNumber(to, ms[i].country) == ms[i].to) {
			at = k
			break
		}
	}
	if at < 0 {
		return -1
	}
	i := idxs[at]
	if idxs = slices.Delete(idxs, at, at+1); len(idxs) == 0 {
		delete(pending, id)
	} else {
		pending[id] = idxs
	}
	return i
}

// poll reads every page of the request's results once and settles the
// messages whose delivery Kakao has decided.
func (p *sens) poll(ctx context.Context, requestID string, ms []*atMessage, pending map[string][]int, vs []sdk.Verdict) {
	next := ""
	for page := 0; page < 20; page++ {
		q := url.Values{"requestId": {requestID}, "pageSize": {"100"}}
		if next != "" {
			q.Set("nextToken", next)
		}
		var res sensResults
		if !p.get(ctx, "?"+q.Encode(), &res) {
			return // an error or nothing yet: the next poll asks again
		}
		for _, r := range res.Messages {
			if r.MessageStatusCode == "" || strings.EqualFold(r.MessageStatusName, "processing") {
				continue
			}
			i := claim(pending, ms, r.MessageID, r.To)
			if i < 0 {
				continue // not a pending message's entry: never credit another's result
			}
			var result map[string]any
			_ = json.Unmarshal(vs[i].Result, &result)
			if result == nil {
				result = map[string]any{}
			}
			result["message_status_code"] = r.MessageStatusCode
			raw, _ := json.Marshal(result)
			switch r.MessageStatusCode {
			case sensDelivered:
				vs[i].Result = raw
				continue
			case kakaoUnconfirmed:
				// Kakao sent it and could not confirm receipt: sending it
				// again could deliver it twice.
				result["delivery"] = "unconfirmed"
				vs[i].Result, _ = json.Marshal(result)
				continue
			}
			v := classifyDelivery(r.MessageStatusCode, strings.TrimSpace(r.MessageStatusName+" "+r.MessageStatusDesc))
			if r.UseSmsFailover {
				// AlimTalk failed and SENS sends the SMS/LMS instead: only a
				// failover that failed lets the message be sent again.
				switch failoverOutcome(r.FailoverStatus, r.FailoverStatusName) {
				case "delivered":
					result["failover"] = "delivered"
					vs[i].Result, _ = json.Marshal(result)
					continue
				case "failed":
					v.Detail += "; the SMS/LMS failover failed too"
					result["failover"] = "failed"
					raw, _ = json.Marshal(result)
				default:
					if v.Outcome == sdk.OutcomeSuccess {
						break
					}
					result["failover"], result["delivery"] = "unknown", "unconfirmed"
					vs[i].Result, _ = json.Marshal(result)
					continue
				}
			}
			if v.Outcome == sdk.OutcomeSuccess {
				maps.Copy(result, resultOf(v))
				vs[i].Result, _ = json.Marshal(result)
				continue
			}
			vs[i] = v.WithStatus(vs[i].ProviderStatus).WithCode(r.MessageStatusCode).WithResult(raw)
		}
		if next = res.NextToken; next == "" {
			return
		}
	}
}

// get signs and sends a GET of the send endpoint with query and decodes a
// 2xx answer into out.
func (p *sens) get(ctx context.Context, query string, out any) bool {
	return getAnswer(ctx, p.client, p.url+query, func(h http.Header) {
		ts := strconv.FormatInt(p.now().UnixMilli(), 10)
		h.Set("x-ncp-apigw-timestamp", ts)
		h.Set("x-ncp-iam-access-key", p.c.accessKey)
		h.Set("x-ncp-apigw-signature-v2", sign(p.c.secretKey, http.MethodGet, p.uri+query, ts, p.c.accessKey))
	}, out)
}

// failed is the verdict of every message of a request SENS refused.
func (p *sens) failed(resp *http.Response, answer []byte) sdk.Verdict {
	resp.Body = http.NoBody
	v := sdk.ClassifyHTTP(resp, nil)
	var e sensError
	code, msg := "", ""
	if json.Unmarshal(answer, &e) == nil {
		switch {
		case e.Error != nil:
			code, msg = e.Error.ErrorCode, strings.TrimSpace(e.Error.Message+" "+e.Error.Details)
		case e.ErrorMessage != "":
			code, msg = e.Status.String(), e.ErrorMessage
		}
	}
	if msg == "" {
		msg = clean(string(answer))
	}
	detail := fmt.Sprintf("SENS refused the request: HTTP %d", resp.StatusCode)
	if code != "" {
		detail += " error " + code
		v = v.WithCode(code)
	}
	if msg != "" {
		detail += ": " + clean(msg)
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		detail += " (check alimtalk.access_key and secret_key, and this host's clock: the signed timestamp must be within 5 minutes of NAVER Cloud's)"
	case http.StatusForbidden:
		detail += " (the access key has no permission for this SENS project, or the project has no AlimTalk service)"
	case http.StatusNotFound:
		detail += " (check alimtalk.service_id)"
	}
	v.Detail = detail
	return v
}

// maskNumber shows a phone number's last four digits only.
func maskNumber(n string) string {
	if len(n) <= 4 {
		return "****"
	}
	return strings.Repeat("*", len(n)-4) + n[len(n)-4:]
}

// deliveryCodes classifies Kakao's delivery result (messageStatusCode of
// SENS's result API) other than 0000. SENS passes Kakao's codes through; the
// table is Kakao's delivery result table as NHN Cloud publishes it
// (https://docs.nhncloud.com/en/Notification/KakaoTalk%20Bizmessage/en/error-code/,
// "Delivery Result Code"). Permanent: the recipient or the message can never
// be delivered as sent; transient: Kakao's own fault or a time window.
var deliveryCodes = map[string]codeInfo{
	"1001": {reason: "the request body was not JSON"},
	"1003": {reason: "invalid sender profile key"},
	"1006": {reason: "the sender profile was deleted"},
	"1007": {reason: "the sender profile is blocked"},
	"1021": {reason: "the KakaoTalk channel is blocked"},
	"1022": {reason: "the KakaoTalk channel is closed"},
	"1023": {reason: "the KakaoTalk channel was deleted"},
	"1024": {reason: "the KakaoTalk channel is pending deletion"},
	"1025": {reason: "the KakaoTalk channel is sanctioned"},
	"2001": {transient: true, reason: "Kakao could not send the message (unexpected error)"},
	"3000": {transient: true, reason: "Kakao unexpected error"},
	"3006": {transient: true, reason: "Kakao internal system error"},
	"3008": {reason: "the phone number is invalid"},
	"3010": {transient: true, reason: "Kakao unexpected error"},
	"3011": {reason: "the message does not exist"},
	"3012": {transient: true, reason: "communication with Kakao failed"},
	"3013": {reason: "the message is empty"},
	"3014": {reason: "the message is over Kakao's length limit"},
	"3015": {reason: "the template was not found"},
	"3016": {reason: "the content does not match the template"},
	"3018": {reason: "cannot send to this user (not active on KakaoTalk in the last 7 days, a SIM/number mismatch, or sanctioned)"},
	"3019": {reason: "the recipient is not a KakaoTalk user"},
	"3020": {reason: "the recipient blocked AlimTalk from this channel"},
	"3021": {reason: "the recipient's KakaoTalk is too old for AlimTalk"},
	"3022": {transient: true, reason: "outside Kakao's sending hours"},
	"3024": {reason: "the image cannot be sent"},
	"3025": {reason: "a variable is over its length limit"},
	"3026": {reason: "a button's extra or event field is over its length limit"},
	"3027": {reason: "the buttons do not match the template"},
	"3028": {reason: "the highlight title does not match the template"},
	"3029": {reason: "the highlight title is over 50 characters"},
	"3030": {reason: "the message type does not match the template"},
	"3031": {reason: "the header does not match the template"},
	"3032": {reason: "the header is over 16 characters"},
	// The result of a message that may have gone out is unknown: never
	// sent again (README, "status unknown").
	"4000": {unknown: true, reason: "the delivery result was not found"},
	"4001": {unknown: true, reason: "the delivery status is unknown"},
	"9998": {transient: true, reason: "Kakao system problem"},
	"9999": {transient: true, reason: "Kakao system problem"},
}

// classifyDelivery is the verdict of a message Kakao did not deliver.
func classifyDelivery(code, desc string) sdk.Verdict {
	info, known := deliveryCodes[code]
	desc = clean(desc)
	// Kakao's codes are four digits: compared as text, "305" and "30401"
	// fell in the range and were final, not unknown.
	n, _ := strconv.Atoi(code)
	switch {
	case !known && len(code) == 4 && allDigits(code) && n >= 3033 && n <= 3058:
		// The item-list and highlight checks of the same table.
		return sdk.Permanent(fmt.Sprintf("Kakao did not deliver the message: %s: the message does not match the template (%s)", code, desc))
	case !known || info.unknown:
		// Kakao did not say it failed to send: sending it again could
		// deliver it twice, so it stays sent, unconfirmed.
		what := "not one this plugin knows"
		if known {
			what = info.reason
		}
		r, _ := json.Marshal(map[string]any{"delivery": "unconfirmed"})
		v := sdk.Success(r)
		v.Detail = fmt.Sprintf("Kakao's delivery result %s (%s) is %s: kept as sent, unconfirmed (sending again could deliver it twice)", code, desc, what)
		return v
	case info.transient:
		return sdk.Transient(fmt.Sprintf("Kakao did not deliver the message: %s: %s (%s)", code, info.reason, desc))
	}
	return sdk.Permanent(fmt.Sprintf("Kakao did not deliver the message: %s: %s (%s)", code, info.reason, desc))
}

// classifyRequestStatus is the verdict of a message SENS did not accept
// (requestStatusCode other than A000). SENS documents A000 alone; the others
// are retried, bounded by the channel's max_attempts, with SENS's own words.
func classifyRequestStatus(code, name, desc string) sdk.Verdict {
	return sdk.Transient(fmt.Sprintf("SENS did not accept the message: requestStatusCode %s (%s)", code, clean(strings.TrimSpace(name+" "+desc))))
}
