package sdk_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// TestClassifyStatus checks ClassifyStatus against ClassifyHTTP on the same
// answers received for real: same outcome, status, retry hint and detail.
func TestClassifyStatus(t *testing.T) {
	t.Parallel()
	srv := answerServer(t)

	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, query := range []string{
		"code=200&body=ok",
		"code=204",
		"code=299&retry_after=5",
		"code=301&body=moved",
		"code=304",
		"code=400&body=" + `{"code":-401}`,
		"code=401",
		"code=404&body=" + strings.Repeat("n", sdk.ClassifyBodyPrefix),
		"code=408",
		"code=410&retry_after=9",
		"code=425",
		"code=429&retry_after=7",
		"code=500&body=" + strings.Repeat("x", 3*sdk.ClassifyBodyPrefix),
		"code=502&body=%00%ff%0Abad%20gateway",
		"code=503&retry_after=" + future,
		"code=503&retry_after=soon",
		"code=599",
		"code=501&retry_after=5",
		"code=505",
		"code=503&retry_after=99999999",
	} {
		t.Run(query, func(t *testing.T) {
			t.Parallel()
			resp, err := http.Get(srv.URL + "?" + strings.ReplaceAll(query, " ", "%20"))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			retryAfter := resp.Header.Get("Retry-After")
			got := sdk.ClassifyStatus(resp.StatusCode, retryAfter, body)

			resp.Body = io.NopCloser(strings.NewReader(string(body)))
			want := sdk.ClassifyHTTP(resp, nil)
			if got.Outcome != want.Outcome || got.ProviderStatus != want.ProviderStatus || got.Detail != want.Detail {
				t.Errorf("ClassifyStatus = %v %d %q; ClassifyHTTP = %v %d %q",
					got.Outcome, got.ProviderStatus, got.Detail, want.Outcome, want.ProviderStatus, want.Detail)
			}
			// An HTTP date is relative to now, which moved between the calls.
			if d := got.RetryAfter - want.RetryAfter; d < -time.Second || d > time.Second {
				t.Errorf("RetryAfter = %v; ClassifyHTTP says %v", got.RetryAfter, want.RetryAfter)
			}
		})
	}
}

func TestClassifyStatus_bodyPrefix(t *testing.T) {
	t.Parallel()
	// Only the start of the body is quoted, cut with …, however much is passed.
	v := sdk.ClassifyStatus(502, "", []byte(strings.Repeat("y", 10*sdk.ClassifyBodyPrefix)))
	if v.Outcome != sdk.OutcomeTransient || !strings.HasSuffix(v.Detail, "…") || len(v.Detail) > sdk.ClassifyBodyPrefix+64 {
		t.Errorf("got %v %q (%d bytes); want TRANSIENT, the body's start cut with …", v.Outcome, v.Detail, len(v.Detail))
	}
	// A short body is quoted whole; no body, no colon.
	if v := sdk.ClassifyStatus(404, "", []byte("no such hook")); v.Detail != "HTTP 404 Not Found: no such hook" {
		t.Errorf("detail = %q", v.Detail)
	}
	if v := sdk.ClassifyStatus(404, "", nil); v.Detail != "HTTP 404 Not Found" {
		t.Errorf("detail = %q", v.Detail)
	}
	if v := sdk.ClassifyStatus(429, "3", nil); v.Outcome != sdk.OutcomeTransient || v.RetryAfter != 3*time.Second {
		t.Errorf("429 Retry-After 3: got %v %v", v.Outcome, v.RetryAfter)
	}
}

func TestClassifyStatus_successAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		if v := sdk.ClassifyStatus(204, "", nil); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("204: %v", v.Outcome)
		}
	}); n != 0 {
		t.Errorf("ClassifyStatus(204) allocates %v times per call; want 0 (it runs once per delivered message)", n)
	}
}

// A 1xx is interim (RFC 9110 §15.2): the one an HTTP client hands back as
// final, 101 Switching Protocols to a request that asked for no upgrade,
// says nothing of the message. It was PERMANENT: dead-lettered.
func TestClassifyStatus_interim(t *testing.T) {
	t.Parallel()
	for _, code := range []int{100, 101, 102, 103, 199} {
		v := sdk.ClassifyStatus(code, "", []byte("ignored"))
		if v.Outcome != sdk.OutcomeTransient || v.ProviderStatus != code || !strings.Contains(v.Detail, "an interim answer") {
			t.Errorf("ClassifyStatus(%d) = %v %d %q; want TRANSIENT, an interim answer", code, v.Outcome, v.ProviderStatus, v.Detail)
		}
	}
}
