package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/notifyd/notifyd/sdk/traceparent"
)

// TestTraceTransport: a request whose ctx carries a trace sends it as
// traceparent, one without sends none, and the caller's request is never
// changed.
func TestTraceTransport(t *testing.T) {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: traceTransport{http.DefaultTransport}}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		ctx  context.Context
		want string
	}{
		{traceparent.ContextWith(context.Background(), tp), tp},
		{context.Background(), ""},
	} {
		req, err := http.NewRequestWithContext(tc.ctx, http.MethodPost, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if g := <-got; g != tc.want {
			t.Errorf("traceparent %q, want %q", g, tc.want)
		}
		if req.Header.Get("traceparent") != "" {
			t.Error("the caller's request was changed")
		}
	}
}

// TestStartSendSpan_off: with tracing off the CLI records nothing and passes
// $TRACEPARENT on for the API to continue; garbage in it is ignored.
func TestStartSendSpan_off(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	t.Setenv("NOTIFYD_TRACING_ENABLED", "")
	for env, want := range map[string]string{tp: tp, "garbage": ""} {
		t.Setenv(envTraceParent, env)
		ctx, on, end := startSendSpan(context.Background(), nil)
		end(nil)
		if on || traceparent.FromContext(ctx) != want {
			t.Errorf("TRACEPARENT=%q: on %v, ctx carries %q; want off carrying %q", env, on, traceparent.FromContext(ctx), want)
		}
	}
}
