package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// TestSender_Send_hugeAnswerHeaders: Kakao's answer (memo, and the token
// refresh on the same client) and an AlimTalk partner's are read within
// sdk.MaxHTTPAnswerHeader of status line and headers, as the SDK's own
// client: both transports read up to net/http's 10 MiB, allocated several
// times over while parsed, per request in flight. A head past the bound is
// TRANSIENT naming it; one within it is read as before.
func TestSender_Send_hugeAnswerHeaders(t *testing.T) {
	t.Parallel()
	bound := strconv.Itoa(sdk.MaxHTTPAnswerHeader)
	check := func(t *testing.T, size int, v sdk.Verdict) {
		t.Helper()
		switch {
		case size < sdk.MaxHTTPAnswerHeader && v.Outcome != sdk.OutcomeSuccess:
			t.Errorf("an answer with a %d-byte header: %v (%.300s); want SUCCESS", size, v.Outcome, v.Detail)
		case size > sdk.MaxHTTPAnswerHeader && (v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, bound)):
			t.Errorf("an answer with a %d-byte header: %v (%.300s); want TRANSIENT naming the %s-byte bound", size, v.Outcome, v.Detail, bound)
		}
	}
	for _, size := range []int{32 << 10, 1 << 20} {
		t.Run("memo "+strconv.Itoa(size), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			front := sdktest.HugeHeaderServer(t, b.fake.api.Config.Handler, size)
			check(t, size, b.send(b.configure(map[string]any{
				"mode": "memo", "access_token": testAccess, "api_url": front.URL, "timeout": "5s",
			}), "", textPayload))
		})
		t.Run("alimtalk "+strconv.Itoa(size), func(t *testing.T) {
			t.Parallel()
			f := newFakeSENS(t)
			front := sdktest.HugeHeaderServer(t, f, size)
			s, logs := atSetup(t, f, map[string]any{"confirm": "accepted", "api_url": front.URL}, quizTemplate)
			vs := s.SendBatch(t.Context(), quizMessages(1, phone))
			check(t, size, vs[0])
			noSecrets(t, logs, vs)
		})
	}
}
