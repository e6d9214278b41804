package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/notifyd/notifyd/sdk"
)

// Kakao answers errors with HTTP 4xx/5xx and a JSON body {"msg": "…", "code":
// -401}; the code, not the status, says what happened (transient errors such
// as -1 and -7 come back as HTTP 400). The table follows Kakao's REST API
// error codes and the KakaoTalk Message error codes:
// https://developers.kakao.com/docs/latest/en/rest-api/error-code
// https://developers.kakao.com/docs/latest/en/kakaotalk-message/trouble-shooting

// Error codes the sender branches on.
const (
	codeInvalidToken = -401
)

// quota says when a quota error clears.
type quota int

const (
	quotaNone    quota = iota
	quotaDaily         // resets at 00:00 KST
	quotaMonthly       // resets on the 1st at 00:00 KST
)

type codeInfo struct {
	transient bool
	// unknown: the code says the outcome is not known (the message may
	// have gone out); never sent again.
	unknown bool
	quota   quota
	reason  string
}

// kakaoCodes is read-only after init.
var kakaoCodes = map[int]codeInfo{
	-1:  {transient: true, reason: "Kakao internal error"},
	-2:  {reason: "invalid request parameters (check the template object and receiver UUID)"},
	-3:  {reason: "API not enabled for the app (app configuration: consent items, allowed APIs)"},
	-4:  {reason: "the Kakao account is blocked or restricted"},
	-5:  {reason: "the app has no permission for this API (app configuration: request a review)"},
	-6:  {reason: "action not allowed by Kakao"},
	-7:  {transient: true, reason: "Kakao service under maintenance or internal problem"},
	-8:  {reason: "invalid request header"},
	-9:  {reason: "the API has been discontinued"},
	-10: {transient: true, quota: quotaDaily, reason: "app's API quota exceeded"},
	// -11 is the paid API's daily *or* monthly spending limit (Kakao's
	// common error codes): the daily one clears at 00:00 KST, so the sender's
	// spendCap retries once after that reset and makes it final if the limit
	// outlasts it (the monthly one, or one nobody raised).
	-11:  {transient: true, quota: quotaDaily, reason: "paid API daily or monthly spending limit reached (Kakao Developers, app settings, paid API limit)"},
	-12:  {reason: "the Kakao Developers app or developer account is suspended"},
	-101: {reason: "the user is not linked to the app"},
	-401: {reason: "invalid or expired access token, or app key mismatch"},
	-402: {reason: "the user has not consented to the required scope (talk_message)"},
	-501: {reason: "the user is not a KakaoTalk member"},
	// -502 is retried: Kakao's REST API error codes give its solution as
	// "Retry to make a request after cached data expires" ("카카오톡 친구
	// 목록 조회 API 응답 캐시 만료 시간이 지난 후, 재요청"), i.e. a friendship
	// newer than Kakao's friends cache is refused until the cache expires
	// (https://developers.kakao.com/docs/latest/en/rest-api/error-code,
	// Kakao Talk Message; https://developers.kakao.com/docs/ko/kakaotalk-message/trouble-shooting).
	// Nothing was sent, so a retry cannot duplicate; a recipient who is
	// not a friend for good is dead-lettered at retry.max_attempts. The
	// cache's lifetime is not documented, so no retry_after is set.
	-502:  {transient: true, reason: "the recipient is not the sender's KakaoTalk friend (Kakao: retry after its friends cache expires; retried)"},
	-530:  {reason: "the recipient refuses messages"},
	-531:  {transient: true, quota: quotaMonthly, reason: "the sender's monthly message quota is exceeded"},
	-532:  {transient: true, quota: quotaDaily, reason: "the sender's daily message quota is exceeded"},
	-533:  {transient: true, quota: quotaDaily, reason: "the recipient's daily message quota is exceeded"},
	-536:  {transient: true, quota: quotaDaily, reason: "the daily quota for this sender and recipient pair is exceeded"},
	-603:  {transient: true, reason: "Kakao internal timeout"},
	-9798: {transient: true, reason: "Kakao service under maintenance"},
}

// kst is Korea Standard Time: UTC+9 all year (no DST), so a fixed zone needs
// no tzdata.
var kst = time.FixedZone("KST", 9*60*60)

// untilQuotaReset is how long from now until a quota of kind q resets.
func untilQuotaReset(now time.Time, q quota) time.Duration {
	t := now.In(kst)
	var next time.Time
	switch q {
	case quotaDaily:
		next = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, kst)
	case quotaMonthly:
		next = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, kst)
	default:
		return 0
	}
	return next.Sub(now)
}

// classifyCode turns a Kakao error code into a verdict.
func classifyCode(now time.Time, status, code int, msg string) sdk.Verdict {
	info, known := kakaoCodes[code]
	var v sdk.Verdict
	switch {
	case !known:
		v = unknownCode(status, strconv.Itoa(code), msg)
	case info.transient:
		v = sdk.Transient(fmt.Sprintf("Kakao error %d: %s: %s", code, info.reason, clean(msg)))
		if info.quota != quotaNone {
			v = v.WithRetryAfter(untilQuotaReset(now, info.quota))
		}
	default:
		v = sdk.Permanent(fmt.Sprintf("Kakao error %d: %s: %s", code, info.reason, clean(msg)))
	}
	return v.WithCode(strconv.Itoa(code)).WithStatus(status)
}

// unknownCode is the verdict of a code this plugin does not know (code is
// its text), by the status it came with.
func unknownCode(status int, code, msg string) sdk.Verdict {
	switch {
	case status >= 500 || status == http.StatusTooManyRequests:
		return sdk.Transient(fmt.Sprintf("Kakao error %s (HTTP %d): %s", code, status, clean(msg)))
	case status == http.StatusBadRequest || status/100 == 2:
		// Kakao answers its temporary faults (-1, -7) with HTTP 400 too: a
		// code new to this table may be one, and dead-lettering it would
		// lose messages a retry delivers. A new final code costs the retry
		// budget, bounded by retry.max_attempts, and then lands there.
		// A code under a 2xx (failure_info, or an error object) is the same
		// failure Kakao answers 400 for a request of one receiver: judged
		// by the 200, it was final for the messages of batched requests.
		return sdk.Transient(fmt.Sprintf("Kakao error %s (HTTP %d, a code this plugin does not know: retried): %s", code, status, clean(msg)))
	}
	return sdk.Permanent(fmt.Sprintf("Kakao error %s (HTTP %d): %s", code, status, clean(msg)))
}

// kakaoCode is a code of Kakao's answers (code, result_code) read whatever
// JSON it comes as: an integer as a number (-1, also -1.0 or -1e0) or in a
// string ("-1"). Anything else (a word, a boolean, an object, a number past
// int32) is kept as its text: a code this plugin cannot read, judged as one
// it does not know. Its reading never fails the answer's: one field of
// another type threw the whole body away (a -1 with an object for msg was
// a bare 400, final; under a 200, a delivery).
type kakaoCode struct {
	n   int
	ok  bool   // n is the code
	raw string // the JSON value as given
}

func (c *kakaoCode) UnmarshalJSON(b []byte) error {
	*c = kakaoCode{raw: string(b)}
	s := string(b)
	var str string
	if json.Unmarshal(b, &str) == nil {
		s = strings.TrimSpace(str)
	}
	if n, err := strconv.Atoi(s); err == nil && n >= math.MinInt32 && n <= math.MaxInt32 {
		c.n, c.ok = n, true
	} else if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && f >= math.MinInt32 && f <= math.MaxInt32 {
		c.n, c.ok = int(f), true
	}
	return nil
}

// text is the code as a detail quotes it.
func (c *kakaoCode) text() string {
	if c.ok {
		return strconv.Itoa(c.n)
	}
	return clean(c.raw) + " (not an integer)"
}

// kakaoText is a text field of Kakao's answers (msg) read whatever JSON it
// comes as: a string as itself, anything else as its JSON text (clean
// bounds it in a detail). Its reading never fails the answer's.
type kakaoText string

func (t *kakaoText) UnmarshalJSON(b []byte) error {
	var s string
	switch {
	case json.Unmarshal(b, &s) == nil:
		*t = kakaoText(s)
	case string(b) == "null":
		*t = ""
	default:
		*t = kakaoText(b)
	}
	return nil
}

// kakaoError is Kakao's error body. Code is a pointer so a body without one
// is told apart from code 0.
type kakaoError struct {
	Msg  kakaoText  `json:"msg"`
	Code *kakaoCode `json:"code"`
}

// verdict is the error's verdict under status: by its code, or, for a code
// that is no integer, as a code this plugin does not know.
func (e kakaoError) verdict(now time.Time, status int) sdk.Verdict {
	if e.Code.ok {
		return classifyCode(now, status, e.Code.n, string(e.Msg))
	}
	return unknownCode(status, e.Code.text(), string(e.Msg)).WithStatus(status)
}

// invalidToken reports Kakao's -401.
func (e kakaoError) invalidToken() bool { return e.Code.ok && e.Code.n == codeInvalidToken }

// decodeKakaoError reads an error body; ok is false when the body has no
// code (garbage, HTML from a proxy, an empty body, "code": null).
func decodeKakaoError(body []byte) (e kakaoError, ok bool) {
	if err := json.Unmarshal(body, &e); err != nil || e.Code == nil {
		return kakaoError{}, false
	}
	return e, true
}

// maxDetail bounds the provider text quoted in a verdict detail.
const maxDetail = 300

// clean makes provider text fit for a one-line detail: valid UTF-8, no
// control characters, at most maxDetail bytes.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxDetail {
		cut := maxDetail
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
