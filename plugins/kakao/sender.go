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
	"strings"
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
	form := url.Values{"template_object": {string(obj)}}
	if s.cfg.mode == modeFriends {
		if m.Recipient == "" {
			return sdk.Permanent("friends mode needs a recipient: the friend's Kakao UUID")
		}
		uuids, err := json.Marshal([]string{m.Recipient})
		if err != nil {
			return sdk.Permanent(fmt.Sprintf("encode receiver_uuids: %v", err))
		}
		form.Set("receiver_uuids", string(uuids))
	}
	body := form.Encode()

	access, gen, err := s.tokens.current(ctx)
	if err != nil {
		return refreshVerdict(err, sdk.Verdict{})
	}
	v, rejected := s.post(ctx, access, body, m.Recipient)
	if !rejected {
		return v
	}
	// Kakao rejected the token (-401): refresh (or pick up the token another
	// send just refreshed) and retry once.
	access, _, err = s.tokens.refreshFrom(ctx, gen)
	if err != nil {
		return refreshVerdict(err, v)
	}
	v, rejected = s.post(ctx, access, body, m.Recipient)
	if rejected {
		v.Outcome = sdk.OutcomePermanent
		v.RetryAfter = 0
		v.Detail = "Kakao rejected the refreshed access token too: " + v.Detail
	}
	return v
}

// post sends the form with the access token. rejected reports Kakao's -401
// (or a bare HTTP 401): the token is invalid or expired.
func (s *sender) post(ctx context.Context, access, body, recipient string) (v sdk.Verdict, rejected bool) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, strings.NewReader(body))
	if err != nil {
		return sdk.Permanent(fmt.Sprintf("build Kakao request: %v", err)), false
	}
	req.Header.Set("Authorization", "Bearer "+access)
	req.Header.Set("Content-Type", formContentType)
	resp, err := s.client.Do(req)
	if err != nil {
		return sdk.ClassifyHTTP(nil, fmt.Errorf("send to Kakao: %w", transportError(err))), false
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return sdk.Transient(fmt.Sprintf("read Kakao's answer: %v", err)).WithStatus(resp.StatusCode), false
	}

	now := s.now()
	if resp.StatusCode/100 == 2 {
		return s.success(now, resp.StatusCode, raw, recipient), false
	}
	if e, ok := decodeKakaoError(raw); ok {
		return classifyCode(now, resp.StatusCode, *e.Code, e.Msg), *e.Code == codeInvalidToken
	}
	// No Kakao error code (a proxy's page, an empty body): judge by status.
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	v = sdk.ClassifyHTTP(resp, nil)
	v.Detail = "Kakao answered without an error code: " + v.Detail
	return v, resp.StatusCode == http.StatusUnauthorized
}

// sendResult is a 2xx answer: memo gives result_code, friends gives the
// receivers it reached and, when some failed, failure_info (the Kotlin SDK
// spells it failure_infos; both are read).
type sendResult struct {
	ResultCode   *int          `json:"result_code"`
	Successful   []string      `json:"successful_receiver_uuids"`
	FailureInfo  []failureInfo `json:"failure_info"`
	FailureInfos []failureInfo `json:"failure_infos"`
}

type failureInfo struct {
	Code          int      `json:"code"`
	Msg           string   `json:"msg"`
	ReceiverUUIDs []string `json:"receiver_uuids"`
}

// success reads a 2xx answer. A friends send answered 200 can still have
// failed for the recipient: failure_info then says why.
func (s *sender) success(now time.Time, status int, raw []byte, recipient string) sdk.Verdict {
	var compact bytes.Buffer
	var res sendResult
	if json.Compact(&compact, raw) != nil || json.Unmarshal(raw, &res) != nil {
		// Not Kakao's JSON (a proxy's page?): the send may not have happened.
		return sdk.Transient(fmt.Sprintf("Kakao answered HTTP %d with an unreadable body: %s", status, clean(string(raw)))).WithStatus(status)
	}
	result := json.RawMessage(compact.Bytes())

	if s.cfg.mode == modeMemo {
		if res.ResultCode != nil && *res.ResultCode != 0 {
			return sdk.Permanent(fmt.Sprintf("Kakao answered HTTP %d with result_code %d", status, *res.ResultCode)).
				WithStatus(status).WithResult(result)
		}
		return sdk.Success(result).WithStatus(status)
	}

	failures := append(res.FailureInfo, res.FailureInfos...)
	for _, f := range failures {
		// One receiver per request, so any failure is this recipient's;
		// prefer the entry that names it.
		if len(f.ReceiverUUIDs) == 0 || slices.Contains(f.ReceiverUUIDs, recipient) {
			return failureVerdict(now, status, f, result)
		}
	}
	if slices.Contains(res.Successful, recipient) {
		return sdk.Success(result).WithStatus(status)
	}
	if len(failures) > 0 {
		return failureVerdict(now, status, failures[0], result)
	}
	if res.Successful == nil {
		return sdk.Success(result).WithStatus(status)
	}
	return sdk.Transient(fmt.Sprintf("Kakao answered HTTP %d but did not list the recipient among successful_receiver_uuids", status)).
		WithStatus(status).WithResult(result)
}

func failureVerdict(now time.Time, status int, f failureInfo, result json.RawMessage) sdk.Verdict {
	v := classifyCode(now, status, f.Code, f.Msg)
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
