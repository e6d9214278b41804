package traceparent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/sdk/traceparent"
)

func TestParse(t *testing.T) {
	t.Parallel()
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if sc, ok := traceparent.Parse(valid); !ok || traceparent.Format(sc) != valid || !sc.IsSampled() {
		t.Errorf("Parse(%q) = %v, %v; want it back, sampled", valid, sc, ok)
	}
	if !traceparent.Valid(valid) || len(valid) != traceparent.Len {
		t.Errorf("Valid(%q) = false", valid)
	}
	for _, bad := range []string{
		"", "garbage", strings.Repeat("x", 10000),
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span id
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\x00",
	} {
		if _, ok := traceparent.Parse(bad); ok && traceparent.Valid(bad) {
			t.Errorf("Valid(%q) = true, want false", bad)
		}
	}
}

func TestContextWith(t *testing.T) {
	t.Parallel()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	ctx := traceparent.ContextWith(context.Background(), tp)
	if got := traceparent.FromContext(ctx); got != tp {
		t.Errorf("FromContext(ContextWith(%q)) = %q", tp, got)
	}
	if got := traceparent.FromContext(traceparent.ContextWith(context.Background(), "bogus")); got != "" {
		t.Errorf("FromContext after an invalid traceparent = %q, want \"\"", got)
	}
}
