package sdk_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// answerServer answers each request as its query says: code, retry_after
// (the Retry-After header), body, and sleep (wait 500 ms first).
func answerServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		if ra := r.URL.Query().Get("retry_after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		if r.URL.Query().Get("sleep") != "" {
			time.Sleep(500 * time.Millisecond)
		}
		w.WriteHeader(code)
		io.WriteString(w, r.URL.Query().Get("body"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestClassifyHTTP(t *testing.T) {
	t.Parallel()
	srv := answerServer(t)

	// An HTTP-date Retry-After is a moment, not a delay: the delay to expect
	// is measured when the answer is classified (-1 below), since parallel
	// subtests on a loaded machine may run seconds after this line.
	retryAt := time.Now().Add(90 * time.Second).UTC().Truncate(time.Second)
	tests := []struct {
		query      string
		want       sdk.Outcome
		retryAfter time.Duration
		detail     string
	}{
		{"code=200&body=ok", sdk.OutcomeSuccess, 0, ""},
		{"code=204", sdk.OutcomeSuccess, 0, ""},
		{"code=400&body=" + `{"code":-401}`, sdk.OutcomePermanent, 0, `HTTP 400 Bad Request: {"code":-401}`},
		{"code=401", sdk.OutcomePermanent, 0, "HTTP 401 Unauthorized"},
		{"code=404", sdk.OutcomePermanent, 0, "HTTP 404 Not Found"},
		{"code=408", sdk.OutcomeTransient, 0, "HTTP 408"},
		{"code=425", sdk.OutcomeTransient, 0, "HTTP 425"},
		{"code=429&retry_after=7", sdk.OutcomeTransient, 7 * time.Second, "HTTP 429 Too Many Requests"},
		{"code=500", sdk.OutcomeTransient, 0, "HTTP 500"},
		{"code=503&retry_after=" + retryAt.Format(http.TimeFormat), sdk.OutcomeTransient, -1, "HTTP 503"},
		{"code=503&retry_after=soon", sdk.OutcomeTransient, 0, "HTTP 503"},
		{"code=304", sdk.OutcomePermanent, 0, "HTTP 304"},
		{"code=501&retry_after=5", sdk.OutcomePermanent, 0, "HTTP 501 Not Implemented"},
		{"code=505", sdk.OutcomePermanent, 0, "HTTP 505 HTTP Version Not Supported"},
		{"code=503&retry_after=99999999", sdk.OutcomeTransient, sdk.MaxRetryAfter, "HTTP 503"},
		{"code=429&retry_after=9300000000", sdk.OutcomeTransient, sdk.MaxRetryAfter, "HTTP 429"},
		{"code=503&retry_after=-5", sdk.OutcomeTransient, 0, "HTTP 503"},
		// 421 says to retry on another connection (RFC 9110 §15.5.20), a 413
		// with Retry-After that the condition is temporary (§15.5.14): both
		// were final.
		{"code=421", sdk.OutcomeTransient, 0, "HTTP 421 Misdirected Request"},
		{"code=413&retry_after=30", sdk.OutcomeTransient, 30 * time.Second, "HTTP 413"},
		{"code=413", sdk.OutcomePermanent, 0, "HTTP 413 Request Entity Too Large"},
		// "Retry-After: 0" or a date past is a Retry-After given, the
		// condition as temporary as with 30 (it was final: no delay parsed).
		{"code=413&retry_after=0", sdk.OutcomeTransient, 0, "HTTP 413"},
		{"code=413&retry_after=Sun, 06 Nov 1994 08:49:37 GMT", sdk.OutcomeTransient, 0, "HTTP 413"},
		{"code=413&retry_after=soon", sdk.OutcomePermanent, 0, "HTTP 413"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			resp, err := http.Get(srv.URL + "?" + strings.ReplaceAll(tt.query, " ", "%20"))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			v := sdk.ClassifyHTTP(resp, err)
			want := tt.retryAfter
			if want < 0 {
				want = time.Until(retryAt)
			}
			if v.Outcome != tt.want || v.ProviderStatus != resp.StatusCode || !strings.HasPrefix(v.Detail, tt.detail) {
				t.Errorf("got %v status %d %q, want %v status %d detail starting %q", v.Outcome, v.ProviderStatus, v.Detail, tt.want, resp.StatusCode, tt.detail)
			}
			// An HTTP date has one-second resolution.
			if d := v.RetryAfter - want; d < -time.Second || d > time.Second {
				t.Errorf("RetryAfter: got %v, want %v", v.RetryAfter, want)
			}
			body, _ := io.ReadAll(resp.Body)
			if want := resp.Request.URL.Query().Get("body"); string(body) != want {
				t.Errorf("body after classify: got %q, want %q (the whole body, still readable)", body, want)
			}
		})
	}

	t.Run("a long body is cut in Detail", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("x", 5000)
		resp, err := http.Get(srv.URL + "?code=502&body=" + long)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		v := sdk.ClassifyHTTP(resp, err)
		if len(v.Detail) > 600 || !strings.HasSuffix(v.Detail, "…") {
			t.Errorf("Detail: got %d bytes %q…, want the body's start cut with …", len(v.Detail), v.Detail[:40])
		}
	})

	t.Run("connection refused is TRANSIENT", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		resp, err := http.Get("http://" + addr)
		if err == nil {
			resp.Body.Close()
			t.Fatal("GET a closed port: got a response, want an error")
		}
		if v := sdk.ClassifyHTTP(resp, err); v.Outcome != sdk.OutcomeTransient || v.ProviderStatus != 0 {
			t.Errorf("got %v status %d, want TRANSIENT status 0", v.Outcome, v.ProviderStatus)
		}
	})

	t.Run("a timeout is TRANSIENT", func(t *testing.T) {
		t.Parallel()
		c := &http.Client{Timeout: 50 * time.Millisecond}
		resp, err := c.Get(srv.URL + "?code=200&sleep=1")
		if err == nil {
			resp.Body.Close()
			t.Fatal("got a response, want a timeout")
		}
		if v := sdk.ClassifyHTTP(resp, err); v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, "Timeout") {
			t.Errorf("got %v %q, want TRANSIENT mentioning the timeout", v.Outcome, v.Detail)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                               0,
		"120":                            2 * time.Minute,
		"0":                              0,
		"-5":                             0,
		"Fri, 02 Jan 2026 03:05:05 GMT":  time.Minute,
		"Fri, 02 Jan 2026 03:00:00 GMT":  0, // past
		"Friday, 02-Jan-26 03:04:15 GMT": 10 * time.Second,
		"tomorrow":                       0,
		"1.5":                            0,
		"+5":                             0,
		"5 ":                             5 * time.Second, // trimmed
		"0x10":                           0,
		"3600":                           sdk.MaxRetryAfter,
		"3601":                           sdk.MaxRetryAfter,
		"99999999":                       sdk.MaxRetryAfter, // 27,777 h before the cap
		"9300000000":                     sdk.MaxRetryAfter, // overflowed to a negative duration
		"99999999999999999999999999":     sdk.MaxRetryAfter, // past int64
		"Fri, 02 Jan 2099 03:05:05 GMT":  sdk.MaxRetryAfter,
		"Fri, 02 Jan 2026 04:04:05 GMT":  sdk.MaxRetryAfter,
		"Fri, 02 Jan 2026 04:04:04 GMT":  time.Hour - time.Second,
	} {
		h := http.Header{}
		if in != "" {
			h.Set("Retry-After", in)
		}
		if got := sdk.RetryAfter(h, now); got != want {
			t.Errorf("RetryAfter(%q): got %v, want %v", in, got, want)
		}
	}
}
