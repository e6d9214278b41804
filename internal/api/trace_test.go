package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/notifyd/notifyd/sdk/client"
)

// TestServer_EnqueueTrace: tracing on, a new notification keeps the trace of
// the API's span (a child of the caller's traceparent); a traceparent that is
// garbage never fails the enqueue; tracing off, nothing is stored.
func TestServer_EnqueueTrace(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(b.ctx) })
	traced := httptest.NewServer(newServer(t, serverOptions{
		Config: b.cfg, Store: b.store, Engine: b.engine, Redis: b.rds.Client, Tracer: tp.Tracer("test"),
	}).Handler())
	t.Cleanup(traced.Close)

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	enqueue := func(t *testing.T, base, traceparent string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(b.ctx, "POST", base+"/v1/notifications",
			strings.NewReader(`{"channel":"orders","recipient":"user-1","payload":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokenA)
		req.Header.Set("traceparent", traceparent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		a := wantStatus(t, answer{status: resp.StatusCode, body: body}, 202)
		var stored *string
		id := decode[client.Enqueued](t, a).ID
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT trace_parent FROM notifications WHERE id = $1`, id).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored == nil {
			return ""
		}
		return *stored
	}

	t.Run("on: the API's span, in the caller's trace", func(t *testing.T) {
		got := enqueue(t, traced.URL, caller)
		ended := spans.Ended()
		if len(ended) == 0 {
			t.Fatal("no span recorded")
		}
		api := ended[len(ended)-1]
		want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + api.SpanContext().SpanID().String() + "-01"
		if got != want || api.Parent().SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("stored %q under span %s (parent %s), want %q: the API's span, child of the caller's",
				got, api.Name(), api.Parent().SpanID(), want)
		}
	})
	t.Run("on: a garbage traceparent starts a trace of the API's own", func(t *testing.T) {
		for _, garbage := range []string{"00-nope", strings.Repeat("f", 4000), "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
			got := enqueue(t, traced.URL, garbage)
			if len(got) != 55 || strings.Contains(got, "4bf92f35") {
				t.Errorf("with traceparent %.40q stored %q, want a new trace", garbage, got)
			}
		}
	})
	t.Run("off: no trace stored, whatever the caller sent", func(t *testing.T) {
		if got := enqueue(t, b.url, caller); got != "" {
			t.Errorf("tracing off stored %q, want NULL", got)
		}
	})
}
