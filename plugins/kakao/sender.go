package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// Endpoints (Kakao's "default template" APIs) and the request encoding.
const (
	pathMemo        = "/v2/api/talk/memo/default/send"
	pathFriends     = "/v1/api/talk/friends/message/default/send"
	formContentType = "application/x-www-form-urlencoded;charset=utf-8"
	// maxBody bounds how much of a response is read; Kakao's are tiny.
	maxBody = 1 << 20
)

// sender delivers one channel's messages.
type sender struct {
	cfg      *config
	client   *http.Client
	tokens   *tokenSource
	endpoint string
	now      func() time.Time
	// spend remembers the -11 (spending limit) reset this channel waits for.
	spend spendCap
	// stopKeeper stops the token keeper (nil without a refresh token).
	stopKeeper context.CancelFunc
}

// Close stops the channel's token keeper; sends in flight finish.
func (s *sender) Close() error {
	if s.stopKeeper != nil {
		s.stopKeeper()
	}
	return nil
}

// Send delivers m and returns Kakao's verdict. No detail ever holds a token.
func (s *sender) Send(ctx context.Context, m sdk.Message) sdk.Verdict {
	v := s.send(ctx, m)
	v.Detail = s.tokens.redact(v.Detail)
	return v
}

func (s *sender) send(ctx context.Context, m sdk.Message) sdk.Verdict {
	obj, err := templateObject(s.cfg.template, m.Payload)
	if err != nil {
		return sdk.Permanent(err.Error())
	}
	if s.cfg.mode == modeFriends && m.Recipient == "" {
		return sdk.Permanent("friends mode needs a recipient: the friend's Kakao UUID")
	}
	var recipients []string
	if s.cfg.mode == modeFriends {
		recipients = []string{m.Recipient}
	}
	return s.sendTo(ctx, obj, recipients)[0]
}

// sendTo sends one template object to up to maxReceivers friends (or, with
// no recipients, to the token's own user) and returns a verdict per
// recipient (one verdict for memo). A failure of the request itself is every
// recipient's verdict; Kakao's failure_info is classified per recipient.
// A -11 (spending limit) is judged by the channel's spendCap; a success
// tells it the limit is lifted.
func (s *sender) sendTo(ctx context.Context, obj json.RawMessage, recipients []string) []sdk.Verdict {
	vs := s.sendOnce(ctx, obj, recipients)
	now := s.now()
	for i, v := range vs {
		switch {
		case v.Outcome == sdk.OutcomeSuccess:
			s.spend.lifted()
		case v.ProviderCode == strconv.Itoa(codeSpendingLimit):
			vs[i] = s.spend.judge(now, v)
		}
	}
	return vs
}

func (s *sender) sendOnce(ctx context.Context, obj json.RawMessage, recipients []string) []sdk.Verdict {
	all := func(v sdk.Verdict) []sdk.Verdict {
		vs := make([]sdk.Verdict, max(1, len(recipients)))
		for i := range vs {
			vs[i] = v
		}
		return vs
	}
	form := url.Values{"template_object": {string(obj)}}
	if len(recipients) > 0 {
		uuids, err := json.Marshal(recipients)
		if err != nil {
			return all(sdk.Permanent(fmt.Sprintf("encode receiver_uuids: %v", err)))
		}
		form.Set("receiver_uuids", string(uuids))
	}
	body := form.Encode()

	access, gen, err := s.tokens.current(ctx)
	if err != nil {
		return all(refreshVerdict(err, sdk.Verdict{}))
	}
	a, rejected := s.post(ctx, access, body)
	if rejected {
		// Kakao rejected the token (-401): refresh (or pick up the token
		// another send just refreshed) and retry once.
		access, _, err = s.tokens.refreshFrom(ctx, gen)
		if err != nil {
			return all(refreshVerdict(err, a.failed))
		}
		a, rejected = s.post(ctx, access, body)
		if rejected {
			v := a.failed
			v.Outcome = sdk.OutcomePermanent
			v.RetryAfter = 0
			v.Detail = "Kakao rejected the refreshed access token too: " + v.Detail
			return all(v)
		}
	}
	if a.raw == nil {
		return all(a.failed)
	}
	if s.cfg.mode == modeMemo {
		return []sdk.Verdict{s.success(a.at, a.status, a.raw, "", true)}
	}
	vs := make([]sdk.Verdict, len(recipients))
	for i, r := range recipients {
		vs[i] = s.success(a.at, a.status, a.raw, r, len(recipients) == 1)
		if len(recipients) > 1 {
			// Each notification keeps its own part of the answer, never the
			// other recipients' UUIDs.
			vs[i].Result = nil
			if vs[i].Outcome == sdk.OutcomeSuccess {
				own, _ := json.Marshal(map[string][]string{"successful_receiver_uuids": {r}})
				vs[i].Result = own
			}
		}
	}
	return vs
}

// answer is one request's outcome: a 2xx body (raw, non-nil) or the verdict
// of the failed request.
type answer struct {
	raw    []byte
	status int
	at     time.Time
	failed sdk.Verdict
}

// post sends the form with the access token. rejected reports Kakao's -401
// (or a bare HTTP 401): the token is invalid or expired.
func (s *sender) post(ctx context.Context, access, body string) (a answer, rejected bool) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader(body))
	if err != nil {
		return answer{failed: sdk.Permanent(fmt.Sprintf("build Kakao request: %v", err))}, false
	}
	req.Header.Set("Authorization", "Bearer "+access)
	req.Header.Set("Content-Type", formContentType)
	resp, err := s.client.Do(req)
	if err != nil {
		return answer{failed: sdk.ClassifyHTTP(nil, fmt.Errorf("send to Kakao: %w", transportError(err)))}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 {
		// An interim or switching answer says nothing of the message.
		return answer{failed: sdk.ClassifyHTTP(resp, nil)}, false
	}
	raw, err := readBody(ctx, resp, maxBody+1)
	if err != nil {
		return answer{failed: sdk.Transient(fmt.Sprintf("read Kakao's answer: %v", err)).WithStatus(resp.StatusCode)}, false
	}
	if len(raw) > maxBody {
		// A prefix cannot decide the verdict: the code may lie past the cut
		// (a -1 read as a bare 400 was final). Kakao's answers are tiny, so
		// this one is not Kakao's word: retried, bounded by the budget.
		return answer{failed: sdk.Transient(fmt.Sprintf("Kakao's answer (HTTP %d) is over %d bytes, not read", resp.StatusCode, maxBody)).WithStatus(resp.StatusCode)}, false
	}

	now := s.now()
	// A code decides the outcome; a Retry-After beside it still raises the
	// hint (it was dropped: a 429 or 503 with Kakao's code was retried at
	// notifyd's own backoff, sooner than asked). sdk.RetryAfter caps it.
	hinted := func(v sdk.Verdict) sdk.Verdict {
		if v.Outcome == sdk.OutcomeTransient {
			v.RetryAfter = max(v.RetryAfter, sdk.RetryAfter(resp.Header, time.Now()))
		}
		return v
	}
	if resp.StatusCode/100 == 2 {
		if e, ok := errorIn2xx(raw); ok {
			// Kakao's error object under a 2xx is no send result: its code
			// decides, as under an error status (a -1 or a -532 taken for a
			// delivery lost the message).
			return answer{failed: hinted(e.verdict(now, resp.StatusCode))}, e.invalidToken()
		}
		if raw == nil {
			raw = []byte{}
		}
		return answer{raw: raw, status: resp.StatusCode, at: now}, false
	}
	if e, ok := decodeKakaoError(raw); ok {
		return answer{failed: hinted(e.verdict(now, resp.StatusCode))}, e.invalidToken()
	}
	// No Kakao error code (a proxy's page, an empty body): judge by status.
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	v := sdk.ClassifyHTTP(resp, nil)
	v.Detail = "Kakao answered without an error code: " + v.Detail
	return answer{failed: v}, resp.StatusCode == http.StatusUnauthorized
}

// sendResult is a 2xx answer: memo gives result_code, friends gives the
// receivers it reached and, when some failed, failure_info (the Kotlin SDK
// spells it failure_infos; both are read). Each field is read on its own
// (decodeSendResult), so one of another JSON type costs that field alone.
type sendResult struct {
	ResultCode *kakaoCode
	// Successful is nil when the answer has no successful_receiver_uuids.
	Successful []string
	Failures   []failureInfo
	// hasFailures: failure_info or failure_infos is there.
	hasFailures bool
	// badSuccessful, badFailures: the field is there but is not a list of
	// what it should hold, so it says nothing either way.
	badSuccessful, badFailures bool
}

type failureInfo struct {
	Code          *kakaoCode  `json:"code"`
	Msg           kakaoText   `json:"msg"`
	ReceiverUUIDs []kakaoText `json:"receiver_uuids"`
}

// names reports whether f names recipient.
func (f failureInfo) names(recipient string) bool {
	return slices.Contains(f.ReceiverUUIDs, kakaoText(recipient))
}

// decodeSendResult reads a 2xx body, each field on its own; err is for a
// body that is not a JSON object.
func decodeSendResult(raw []byte) (res sendResult, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return sendResult{}, err
	}
	if f, ok := fields["result_code"]; ok && string(f) != "null" {
		res.ResultCode = new(kakaoCode)
		_ = res.ResultCode.UnmarshalJSON(f)
	}
	if f, ok := fields["successful_receiver_uuids"]; ok && string(f) != "null" {
		var ids []kakaoText
		if json.Unmarshal(f, &ids) != nil {
			res.badSuccessful = true
		}
		res.Successful = make([]string, 0, len(ids))
		for _, id := range ids {
			res.Successful = append(res.Successful, string(id))
		}
	}
	for _, key := range []string{"failure_info", "failure_infos"} {
		if f, ok := fields[key]; ok && string(f) != "null" {
			res.hasFailures = true
			var fs []failureInfo
			if json.Unmarshal(f, &fs) != nil {
				res.badFailures = true
			}
			res.Failures = append(res.Failures, fs...)
		}
	}
	return res, nil
}

// errorIn2xx reports a 2xx body that is Kakao's error object: a non-zero
// code and none of a send result's fields (a result with a code beside it
// is read as a result; Kakao's error codes are negative, 0 is none).
func errorIn2xx(raw []byte) (kakaoError, bool) {
	e, ok := decodeKakaoError(raw)
	if !ok || (e.Code.ok && e.Code.n == 0) {
		return kakaoError{}, false
	}
	res, err := decodeSendResult(raw)
	if err != nil || res.ResultCode != nil || res.Successful != nil || res.hasFailures {
		return kakaoError{}, false
	}
	return e, true
}

// success reads a 2xx answer for one recipient. A friends send answered 200
// can still have failed for the recipient: failure_info then says why. single
// says the request carried only this recipient, so a failure that names no
// one is its own.
func (s *sender) success(now time.Time, status int, raw []byte, recipient string, single bool) sdk.Verdict {
	var compact bytes.Buffer
	res, err := decodeSendResult(raw)
	if err != nil || json.Compact(&compact, raw) != nil {
		// Not Kakao's JSON (a proxy's page?): the send may not have happened.
		return sdk.Transient(fmt.Sprintf("Kakao answered HTTP %d with an unreadable body: %s", status, clean(string(raw)))).WithStatus(status)
	}
	result := json.RawMessage(compact.Bytes())

	if s.cfg.mode == modeMemo {
		switch rc := res.ResultCode; {
		case rc != nil && !rc.ok:
			return sdk.Transient(fmt.Sprintf("Kakao answered HTTP %d with result_code %s", status, rc.text())).
				WithStatus(status).WithResult(result)
		case rc != nil && rc.n != 0:
			return sdk.Permanent(fmt.Sprintf("Kakao answered HTTP %d with result_code %d", status, rc.n)).
				WithStatus(status).WithResult(result)
		}
		return sdk.Success(result).WithStatus(status)
	}

	for _, f := range res.Failures {
		if f.names(recipient) {
			return failureVerdict(now, status, f, result)
		}
	}
	if slices.Contains(res.Successful, recipient) {
		return sdk.Success(result).WithStatus(status)
	}
	if res.badFailures || res.badSuccessful {
		// A list that cannot be read may name the recipient: the send may
		// not have happened for it.
		return sdk.Transient(fmt.Sprintf("Kakao answered HTTP %d with successful_receiver_uuids or failure_info that is not a list of receivers, and the rest does not name the recipient", status)).
			WithStatus(status).WithResult(result)
	}
	for _, f := range res.Failures {
		// A failure naming no one is every unlisted recipient's.
		if len(f.ReceiverUUIDs) == 0 {
			return failureVerdict(now, status, f, result)
		}
	}
	if single && len(res.Failures) > 0 {
		return failureVerdict(now, status, res.Failures[0], result)
	}
	if res.Successful == nil {
		return sdk.Success(result).WithStatus(status)
	}
	return sdk.Transient(fmt.Sprintf("Kakao answered HTTP %d but did not list the recipient among successful_receiver_uuids", status)).
		WithStatus(status).WithResult(result)
}

func failureVerdict(now time.Time, status int, f failureInfo, result json.RawMessage) sdk.Verdict {
	e := kakaoError{Msg: f.Msg, Code: f.Code}
	if e.Code == nil {
		e.Code = &kakaoCode{ok: true} // no code: 0, one this plugin does not know
	}
	v := e.verdict(now, status)
	v.Detail += fmt.Sprintf(" (failure_info of an HTTP %d answer)", status)
	return v.WithResult(result)
}

// refreshVerdict is the verdict when no usable access token could be had;
// rejected is the send's -401 verdict, if there was one.
func refreshVerdict(err error, rejected sdk.Verdict) sdk.Verdict {
	status, code := rejected.ProviderStatus, rejected.ProviderCode
	var re *refreshError
	switch {
	case errors.Is(err, errNoRefreshToken):
		return sdk.Permanent(fmt.Sprintf("%s; %s", rejected.Detail, err)).WithStatus(status).WithCode(code)
	case errors.As(err, &re):
		if re.code != "" {
			code = re.code
		}
		if re.status != 0 {
			status = re.status
		}
		if re.transient {
			return sdk.Transient("could not refresh the Kakao access token: " + re.detail).WithStatus(status).WithCode(code)
		}
		return sdk.Permanent("could not refresh the Kakao access token: " + re.detail).
			WithStatus(status).WithCode(code)
	}
	return sdk.Transient("could not refresh the Kakao access token: " + err.Error()).WithStatus(status).WithCode(code)
}

// maxReceivers is how many receiver_uuids Kakao's friends API takes in one
// request.
const maxReceivers = 5

// friendsSender is a friends-mode sender that sends one template object to
// up to maxReceivers friends per request.
type friendsSender struct{ *sender }

// SendBatch groups the batch by rendered template object and sends each
// group in requests of up to maxReceivers distinct recipients, concurrently
// (at most maxGroupRequests at once). Each message gets its own verdict:
// Kakao's failure_info is per recipient, a failed request is each of its
// recipients'.
func (f friendsSender) SendBatch(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
	vs := make([]sdk.Verdict, len(ms))
	type group struct {
		obj  json.RawMessage
		idxs []int
	}
	var groups []*group
	byObj := map[string]*group{}
	for i, m := range ms {
		obj, err := templateObject(f.cfg.template, m.Payload)
		switch {
		case err != nil:
			vs[i] = sdk.Permanent(err.Error())
			continue
		case m.Recipient == "":
			vs[i] = sdk.Permanent("friends mode needs a recipient: the friend's Kakao UUID")
			continue
		}
		g := byObj[string(obj)]
		if g == nil {
			g = &group{obj: obj}
			byObj[string(obj)] = g
			groups = append(groups, g)
		}
		g.idxs = append(g.idxs, i)
	}
	// Split each group into requests of distinct recipients.
	type request struct {
		obj  json.RawMessage
		idxs []int
	}
	var reqs []request
	for _, g := range groups {
		var open []*request
		for _, i := range g.idxs {
			placed := false
			for _, r := range open {
				if len(r.idxs) < maxReceivers && !slices.ContainsFunc(r.idxs, func(j int) bool { return ms[j].Recipient == ms[i].Recipient }) {
					r.idxs = append(r.idxs, i)
					placed = true
					break
				}
			}
			if !placed {
				open = append(open, &request{obj: g.obj, idxs: []int{i}})
			}
		}
		for _, r := range open {
			reqs = append(reqs, *r)
		}
	}
	sem := make(chan struct{}, maxGroupRequests)
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			recipients := make([]string, len(r.idxs))
			for k, i := range r.idxs {
				recipients[k] = ms[i].Recipient
			}
			got := f.sendTo(ctx, r.obj, recipients)
			if code, ok := refusedForSome(got); ok && len(recipients) > 1 {
				// Kakao refused the whole request for what one receiver may
				// have caused (-2 "not allowed to send to some of the
				// receivers", -502, -530, …) and sent it to no one: send
				// each receiver alone, so only the ones at fault fail.
				for k, rc := range recipients {
					got[k] = f.sendTo(ctx, r.obj, []string{rc})[0]
					if got[k].Outcome != sdk.OutcomeSuccess {
						got[k].Detail += fmt.Sprintf(" (sent alone after Kakao refused its request of %d receivers with %s)", len(recipients), code)
					}
				}
			}
			for k, v := range got {
				v.Detail = f.tokens.redact(v.Detail)
				vs[r.idxs[k]] = v
			}
		}()
	}
	wg.Wait()
	return vs
}

// maxGroupRequests bounds one batch's concurrent requests to Kakao.
const maxGroupRequests = 16

// receiverCodes are Kakao's codes that refuse a whole friends request for
// what one receiver can cause (Kakao Talk Message error codes: -2 "Not
// allowed to send a message to some of receivers", -502 not a friend, -530
// refuses messages, -533/-536 a receiver's daily quota; REST API error
// codes: -501 not a KakaoTalk user). Answered for the request, they name no
// receiver and nothing was sent. (-502, -533 and -536 are retried for the
// receiver at fault: classify.go.)
var receiverCodes = map[string]bool{"-2": true, "-501": true, "-502": true, "-530": true, "-533": true, "-536": true}

// refusedForSome reports whether vs is one request-level refusal (no
// failure_info, so no result) with a code one receiver can cause.
func refusedForSome(vs []sdk.Verdict) (code string, ok bool) {
	for _, v := range vs {
		if v.Outcome == sdk.OutcomeSuccess || v.Result != nil || !receiverCodes[v.ProviderCode] || v.ProviderCode != vs[0].ProviderCode {
			return "", false
		}
	}
	return vs[0].ProviderCode, len(vs) > 0
}

// codeSpendingLimit is Kakao's -11: the paid API's daily or monthly
// spending limit is reached.
const codeSpendingLimit = -11

// spendCap tells a daily spending limit (-11 clears at 00:00 KST) from a
// monthly one. The first -11 is retried after the next 00:00 KST; a -11
// answered after that reset with no success in between is final: the limit
// outlasted the day, so a person must raise it. It is the channel's, not
// the message's (the limit is the app's): a message that meets a limit
// which already outlasted a reset is final at once. A restart forgets it,
// which costs at most one more day of retries.
type spendCap struct {
	mu    sync.Mutex
	reset time.Time // the 00:00 KST the first -11 waits for; zero: none
}

func (c *spendCap) judge(now time.Time, v sdk.Verdict) sdk.Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reset.IsZero() {
		c.reset = now.Add(untilQuotaReset(now, quotaDaily))
	}
	if now.Before(c.reset) {
		v.Outcome, v.RetryAfter = sdk.OutcomeTransient, c.reset.Sub(now)
		v.Detail += "; retried once after 00:00 KST, when a daily limit resets"
		return v
	}
	v.Outcome, v.RetryAfter = sdk.OutcomePermanent, 0
	v.Detail += fmt.Sprintf("; final: the limit outlasted the %s reset (a monthly limit, or a daily one nobody raised): a person must raise it in Kakao Developers, then replay the dead letters",
		c.reset.In(kst).Format("2006-01-02 15:04 KST"))
	return v
}

// lifted forgets the limit: a send went through.
func (c *spendCap) lifted() {
	c.mu.Lock()
	c.reset = time.Time{}
	c.mu.Unlock()
}
