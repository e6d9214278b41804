package sdk_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/traceparent"
)

// TestServe_SendTrace: one batch carries a trace per message (and an
// untraced one); each Send's ctx has its own message's trace as the parent
// span context, with nothing done by the plugin.
func TestServe_SendTrace(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := map[int64]trace.SpanContext{}
	c := serve(t, &fixture{info: sdk.Info{Name: "traced"}, configure: senderFor(sdk.SenderFunc(
		func(ctx context.Context, m sdk.Message) sdk.Verdict {
			mu.Lock()
			got[m.ID] = trace.SpanContextFromContext(ctx)
			mu.Unlock()
			return sdk.Success(nil)
		}))})
	ms := messages(3, time.Now().Add(5*time.Second))
	want := map[int64]string{
		1: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		2: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	}
	ms[0].TraceParent, ms[1].TraceParent = want[1], want[2]
	ms[2].TraceParent = "not-a-traceparent" // ignored, never a failure
	vs, err := c.Send(context.Background(), ms)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if v.Outcome != sdk.OutcomeSuccess {
			t.Errorf("message %d: %v %s, want SUCCESS", i+1, v.Outcome, v.Detail)
		}
	}
	for id, tp := range want {
		sc := got[id]
		if !sc.IsRemote() || traceparent.Format(sc) != tp {
			t.Errorf("message %d: Send's ctx carries %q (remote %v), want the message's %q", id, traceparent.Format(sc), sc.IsRemote(), tp)
		}
	}
	if sc := got[3]; sc.IsValid() {
		t.Errorf("message 3 (invalid traceparent): Send's ctx carries %q, want no trace", traceparent.Format(sc))
	}
}
