package sdk_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// TestHTTPSender_bodylessReplayedOnce: net/http replays a request without a
// body (a GET, HEAD or DELETE, a POST with none) that carries an
// Idempotency-Key on every idle connection lost before the answer, then on
// a new one, and no GetBody hook bounds it: ReplayOnce left such a request
// as it was, and one Send to a provider that reads each request and drops
// the connection delivered it up to MaxIdleConnsPerHost + 1 times (65 here).
// ReplayOnce now bounds every request to two sends in one call, with a body
// or without, through HTTPSender or on a client of one's own.
func TestHTTPSender_bodylessReplayedOnce(t *testing.T) {
	t.Parallel()
	const warm = 8
	own := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(own.CloseIdleConnections)
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			p := sdktest.NewDroppingReceiver(t, "/send", warm)
			s := &sdk.HTTPSender{Client: &http.Client{Transport: own}, Build: func(ctx context.Context, m sdk.Message) (*http.Request, error) {
				return http.NewRequestWithContext(ctx, method, p.URL, nil)
			}}
			send := func(m sdk.Message) sdk.Verdict { return s.Send(context.Background(), m) }
			warmUp(t, p, warm, send)
			v := send(sdk.Message{ID: 1})
			if v.Outcome != sdk.OutcomeTransient {
				t.Errorf("verdict %v (%s); want TRANSIENT", v.Outcome, v.Detail)
			}
			if got := p.Dropped(); got < 1 || got > 2 {
				t.Errorf("the provider got the %s %d times in one send (%s); want 1 or 2", method, got, v.Detail)
			}
		})
	}

	t.Run("ReplayOnce on a client of one's own", func(t *testing.T) {
		t.Parallel()
		p := sdktest.NewDroppingReceiver(t, "/send", warm)
		client := &http.Client{Transport: own}
		do := func() (*http.Response, error) {
			req, _ := http.NewRequest(http.MethodDelete, p.URL, nil)
			req.Header.Set("Idempotency-Key", "k-1")
			return client.Do(sdk.ReplayOnce(req))
		}
		warmUp(t, p, warm, func(sdk.Message) sdk.Verdict {
			resp, err := do()
			if err != nil {
				return sdk.Transient(err.Error())
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return sdk.Success(nil)
		})
		resp, err := do()
		if err == nil {
			resp.Body.Close()
			t.Fatal("a dropped DELETE answered")
		}
		if got := p.Dropped(); got < 1 || got > 2 {
			t.Errorf("the provider got the DELETE %d times in one call (%v); want 1 or 2", got, err)
		}
		if got := p.Dropped(); got == 2 && !strings.Contains(err.Error(), "not sent again") {
			t.Errorf("error %q; want it to say the request was not sent again", err)
		}
	})
}
