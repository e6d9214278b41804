package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// TestSender_Send_hugeAnswerHeaders: Voyage's answer and the callback URL's
// are read within sdk.MaxHTTPAnswerHeader of status line and headers, as the
// SDK's own client: the plugin's transport read up to net/http's 10 MiB,
// allocated several times over while parsed, per request in flight (64 idle
// connections a host). A head past the bound is TRANSIENT naming it; one
// within it is read as before.
func TestSender_Send_hugeAnswerHeaders(t *testing.T) {
	t.Parallel()
	bound := strconv.Itoa(sdk.MaxHTTPAnswerHeader)
	for _, size := range []int{32 << 10, 1 << 20} {
		for _, where := range []string{"voyage", "callback"} {
			t.Run(where+" "+strconv.Itoa(size), func(t *testing.T) {
				t.Parallel()
				f, cb := newFakeVoyage(t), newCallbackSink(t)
				base, callback := f.URL, cb.URL
				if where == "voyage" {
					base = sdktest.HugeHeaderServer(t, f.Config.Handler, size).URL
				} else {
					callback = sdktest.HugeHeaderServer(t, cb.Config.Handler, size).URL
				}
				s := configure(t, map[string]any{"api_key": testKey, "base_url": base, "model": "voyage-3.5", "callback_url": callback})
				v := s.Send(context.Background(), message(`{"input":"a"}`))
				switch {
				case size < sdk.MaxHTTPAnswerHeader && v.Outcome != sdk.OutcomeSuccess:
					t.Errorf("an answer with a %d-byte header: %v (%.300s); want SUCCESS", size, v.Outcome, v.Detail)
				case size > sdk.MaxHTTPAnswerHeader && (v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, bound)):
					t.Errorf("an answer with a %d-byte header: %v (%.300s); want TRANSIENT naming the %s-byte bound", size, v.Outcome, v.Detail, bound)
				}
			})
		}
	}
}
