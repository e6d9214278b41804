package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/traceparent"
)

// TestSender_Send_trace: a traced message's request carries the traceparent
// (and tracestate) of Send's ctx, directly (fasthttp) and through a proxy
// (net/http); an untraced one carries none.
func TestSender_Send_trace(t *testing.T) {
	t.Parallel()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ts, err := trace.ParseTraceState("vendor=abc")
	if err != nil {
		t.Fatal(err)
	}
	traced := func() (context.Context, sdk.Message) {
		sc, _ := traceparent.Parse(tp)
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc.WithTraceState(ts))
		m := testMessage()
		m.TraceParent = tp
		return ctx, m
	}

	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		r := newReceiver(t, nil)
		s := configure(t, &provider{}, map[string]any{"url": r.URL})
		ctx, m := traced()
		if v := s.Send(ctx, m); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("traced: %v (%s)", v.Outcome, v.Detail)
		}
		got := r.next(t)
		if got.header.Get("traceparent") != tp || got.header.Get("tracestate") != "vendor=abc" {
			t.Errorf("traceparent %q, tracestate %q; want %q, vendor=abc", got.header.Get("traceparent"), got.header.Get("tracestate"), tp)
		}
		if v := s.Send(context.Background(), testMessage()); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("untraced: %v (%s)", v.Outcome, v.Detail)
		}
		if got := r.next(t); got.header.Get("traceparent") != "" {
			t.Errorf("untraced message sent traceparent %q", got.header.Get("traceparent"))
		}
	})

	t.Run("through a proxy", func(t *testing.T) {
		t.Parallel()
		headers := make(chan http.Header, 1)
		proxySrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			headers <- r.Header.Clone()
		}))
		t.Cleanup(proxySrv.Close)
		proxyURL, _ := url.Parse(proxySrv.URL)
		p := &provider{proxy: func(*url.URL) (*url.URL, error) { return proxyURL, nil }}
		s := configure(t, p, map[string]any{"url": "http://hooks.example.com/in"})
		ctx, m := traced()
		if v := s.Send(ctx, m); v.Outcome != sdk.OutcomeSuccess {
			t.Fatalf("%v (%s)", v.Outcome, v.Detail)
		}
		select {
		case h := <-headers:
			if h.Get("traceparent") != tp || h.Get("tracestate") != "vendor=abc" {
				t.Errorf("traceparent %q, tracestate %q; want %q, vendor=abc", h.Get("traceparent"), h.Get("tracestate"), tp)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the proxy got no request")
		}
	})
}
