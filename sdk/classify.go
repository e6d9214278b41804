package sdk

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// bodyPrefix is how much of a failed response's body ClassifyHTTP puts in
// the verdict's Detail.
const bodyPrefix = 512

// MaxRetryAfter caps the retry hint RetryAfter reads from a Retry-After
// header: a provider (or anything posing as one) answering "Retry-After:
// 99999999" must not park a message for years. notifyd additionally caps
// every hint by the channel's retry policy.
const MaxRetryAfter = time.Hour

// ClassifyHTTP turns the result of an HTTP call to a provider into a
// Verdict:
//
//   - err != nil (timeouts, refused or reset connections, DNS): the request
//     never got an answer, so TRANSIENT — the message is not at fault. The
//     exceptions are errors no retry can fix, which are PERMANENT: a TLS
//     certificate the client does not accept (untrusted, expired, for another
//     host), a receiver that does not speak TLS on an https:// URL, and one
//     that speaks only TLS versions the client refuses (1.0, 1.1).
//   - 2xx: SUCCESS. The body is left unread for the caller to parse.
//   - 501 Not Implemented and 505 HTTP Version Not Supported: PERMANENT (the
//     receiver will not do this, however often it is asked).
//   - 408, 421 (Misdirected Request: "the client MAY retry the request …
//     over a different connection", RFC 9110 §15.5.20), 423, 425, 429, 499
//     (a proxy's "client closed request": most often our own timeout seen
//     through it), a 413 that gives a Retry-After, even 0 or a date past
//     (RFC 9110 §15.5.14: the condition is temporary) and every other 5xx:
//     TRANSIENT, with Retry-After (seconds or an HTTP date, at most
//     MaxRetryAfter) as the retry hint.
//   - a status outside 200-599: TRANSIENT — the answer says nothing of the
//     message, and nothing about a broken receiver makes the message final.
//     Below 100 or past 599 it is a garbled status line; a 1xx is interim
//     (RFC 9110 §15.2), and the one an HTTP client hands back as final, 101
//     Switching Protocols to a request that asked for no upgrade, leaves
//     resp.Body the raw connection, which no request deadline covers: its
//     body is closed here and replaced by http.NoBody.
//   - 409 Conflict to a request that carried an Idempotency-Key (HTTPSender
//     adds one): TRANSIENT — the receiver may still be working on an earlier
//     attempt with that key, which may yet deliver the message.
//   - any other status (most 4xx, an unfollowed 3xx): PERMANENT.
//
// ProviderStatus is set whenever there is a response. On failure Detail
// holds the status and the start of the body; the body is put back so the
// caller can still read all of it (for a provider error code, say) and must
// still close it.
func ClassifyHTTP(resp *http.Response, err error) Verdict {
	if err != nil {
		if why := finalTransportError(err); why != "" {
			return Permanent("request failed: " + err.Error() + " (final: " + why + ")")
		}
		return Transient("request failed: " + err.Error())
	}
	if resp == nil {
		return Transient("request failed: no response")
	}
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return Success(nil).WithStatus(code)
	}
	if code >= 100 && code < 200 {
		if resp.Body != nil && resp.Body != http.NoBody {
			_ = resp.Body.Close()
			resp.Body = http.NoBody
		}
		return Transient(fmt.Sprintf("HTTP %d %s: an interim answer, not one about the message", code, http.StatusText(code))).WithStatus(code)
	}
	detail := fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	if code < 100 || code > 599 {
		detail = fmt.Sprintf("HTTP %d: not a status code (a garbled status line)", code)
	}
	if body := peekBody(resp); body != "" {
		detail += ": " + body
	}
	retryAfter, hinted := retryAfterHint(resp.Header, time.Now())
	switch {
	case code < 100 || code > 599:
		return Transient(detail).WithStatus(code).WithRetryAfter(retryAfter)
	case code == http.StatusNotImplemented, code == http.StatusHTTPVersionNotSupported:
		return Permanent(detail).WithStatus(code)
	case code == http.StatusConflict && resp.Request != nil && resp.Request.Header.Get("Idempotency-Key") != "":
		// A receiver that honours Idempotency-Key answers 409 to a request
		// whose key is still being processed (draft-ietf-httpapi-
		// idempotency-key-header §2.7; Stripe alike): an earlier attempt,
		// cut off by our deadline, may yet deliver the message, and a later
		// retry gets its stored answer. Final, a delivered message was
		// dead-lettered. A receiver that answers 409 for good is retried up
		// to retry.max_attempts, then dead-lettered as before.
		return Transient(detail + " (an earlier request with this Idempotency-Key may still be in progress: retried)").
			WithStatus(code).WithRetryAfter(retryAfter)
	case code == http.StatusRequestTimeout, code == http.StatusMisdirectedRequest, code == http.StatusTooEarly,
		code == http.StatusTooManyRequests, code == http.StatusLocked, code == statusClientClosedRequest,
		code == http.StatusRequestEntityTooLarge && hinted,
		code >= 500:
		return Transient(detail).WithStatus(code).WithRetryAfter(retryAfter)
	default:
		return Permanent(detail).WithStatus(code)
	}
}

// statusClientClosedRequest is nginx's 499: the client (or a proxy's own
// timeout on its behalf) went away before the answer.
const statusClientClosedRequest = 499

// RetryAfter parses a Retry-After header (delay-seconds or an HTTP date,
// RFC 9110 §10.2.3) relative to now, capped at MaxRetryAfter. It is 0 when
// the header is absent or malformed (a sign, a fraction, garbage) and when
// the date is past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	d, _ := retryAfterHint(h, now)
	return d
}

// retryAfterHint is RetryAfter, and whether the header is there and well
// formed: "Retry-After: 0" and a date past are a hint given (a 413 with
// one is temporary) whose delay is 0.
func retryAfterHint(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, ok := delaySeconds(v); ok {
		return secs, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if t.After(now) {
		return min(t.Sub(now).Round(time.Second), MaxRetryAfter), true
	}
	return 0, true
}

// delaySeconds reads 1*DIGIT as a duration capped at MaxRetryAfter. It never
// overflows: digits past the cap stop counting, however many follow.
func delaySeconds(v string) (time.Duration, bool) {
	const maxSecs = int64(MaxRetryAfter / time.Second)
	var secs int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if secs <= maxSecs {
			secs = secs*10 + int64(c-'0')
		}
	}
	return time.Duration(min(secs, maxSecs)) * time.Second, true
}

// peekBody reads the start of the body for an operator-readable detail and
// puts it back in front of the rest.
func peekBody(resp *http.Response) string {
	if resp.Body == nil || resp.Body == http.NoBody {
		return ""
	}
	buf := make([]byte, bodyPrefix)
	n, _ := io.ReadFull(resp.Body, buf)
	buf = buf[:n]
	resp.Body = &rewoundBody{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), Closer: resp.Body}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(buf), "")), " ")
	if n == bodyPrefix {
		s += "…"
	}
	return s
}

type rewoundBody struct {
	io.Reader
	io.Closer
}
