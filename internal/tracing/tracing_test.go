package tracing_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/tracing"
	"github.com/notifyd/notifyd/sdk/traceparent"
)

// kept is an in-memory exporter whose spans outlive the provider's
// Shutdown (the batcher exports at Shutdown; the exporter's own would clear
// them).
type kept struct{ *tracetest.InMemoryExporter }

func (kept) Shutdown(context.Context) error { return nil }

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestNew_off(t *testing.T) {
	t.Parallel()
	on := config.Tracing{Enabled: true, SampleRatio: 1}
	for name, tc := range map[string]struct {
		cfg config.Tracing
		env map[string]string
	}{
		"not enabled":          {config.Tracing{SampleRatio: 1}, nil},
		"OTEL_SDK_DISABLED":    {on, map[string]string{"OTEL_SDK_DISABLED": "true"}},
		"OTEL_TRACES_EXPORTER": {on, map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
	} {
		p, err := tracing.New(context.Background(), tc.cfg, tracing.Options{Getenv: env(tc.env)})
		if err != nil || p != nil || p.Tracer() != nil {
			t.Errorf("%s: New = %v, %v; want nil (off), whose Tracer is nil", name, p, err)
		}
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("%s: Shutdown of nil: %v", name, err)
		}
	}
}

// TestNew_sampling: sample_ratio picks among new traces; a caller's sampled
// flag decides for its own.
func TestNew_sampling(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	p, err := tracing.New(context.Background(), config.Tracing{Enabled: true, SampleRatio: 0},
		tracing.Options{Getenv: env(nil), Exporter: kept{exp}})
	if err != nil || p == nil {
		t.Fatalf("New = %v, %v", p, err)
	}
	tr := p.Tracer()
	_, root := tr.Start(context.Background(), "new trace")
	sampled := traceparent.ContextWith(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	_, child := tr.Start(sampled, "caller sampled")
	unsampled := traceparent.ContextWith(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-00")
	_, skipped := tr.Start(unsampled, "caller did not sample")
	if root.IsRecording() || !child.IsRecording() || skipped.IsRecording() {
		t.Errorf("recording: new %v, under a sampled caller %v, under an unsampled one %v; want false, true, false",
			root.IsRecording(), child.IsRecording(), skipped.IsRecording())
	}
	if got := traceparent.Format(skipped.SpanContext()); got == "" || got[3:35] != "4bf92f3577b34da6a3ce929d0e0e4737" {
		t.Errorf("an unsampled caller's trace is not passed on: %q", got)
	}
	root.End()
	child.End()
	skipped.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp.GetSpans(); len(got) != 1 || got[0].Name != "caller sampled" {
		t.Errorf("exported %d spans, want only the sampled caller's", len(got))
	}
}
