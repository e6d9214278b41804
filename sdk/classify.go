package sdk

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// bodyPrefix is how much of a failed response's body ClassifyHTTP puts in
// the verdict's Detail.
const bodyPrefix = 512

// ClassifyHTTP turns the result of an HTTP call to a provider into a
// Verdict:
//
//   - err != nil (timeouts, refused or reset connections, DNS, TLS): the
//     request never got an answer, so TRANSIENT — the message is not at fault.
//   - 2xx: SUCCESS. The body is left unread for the caller to parse.
//   - 408, 425, 429 and 5xx: TRANSIENT, with Retry-After (seconds or an HTTP
//     date) as the retry hint.
//   - any other status (most 4xx, an unfollowed 3xx): PERMANENT.
//
// ProviderStatus is set whenever there is a response. On failure Detail
// holds the status and the start of the body; the body is put back so the
// caller can still read all of it (for a provider error code, say) and must
// still close it.
func ClassifyHTTP(resp *http.Response, err error) Verdict {
	if err != nil {
		return Transient("request failed: " + err.Error())
	}
	if resp == nil {
		return Transient("request failed: no response")
	}
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return Success(nil).WithStatus(code)
	}
	detail := fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	if body := peekBody(resp); body != "" {
		detail += ": " + body
	}
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly,
		code == http.StatusTooManyRequests, code >= 500:
		return Transient(detail).WithStatus(code).WithRetryAfter(RetryAfter(resp.Header, time.Now()))
	default:
		return Permanent(detail).WithStatus(code)
	}
}

// RetryAfter parses a Retry-After header (delay-seconds or an HTTP date,
// RFC 9110 §10.2.3) relative to now; 0 when absent, malformed or past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
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
