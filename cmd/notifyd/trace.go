package main

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/tracing"
	"github.com/notifyd/notifyd/internal/version"
	"github.com/notifyd/notifyd/sdk/traceparent"
)

// envTraceParent lets a script hand `notifyd send` the trace it runs in (the
// W3C traceparent, as otel-cli and CI systems export it); an invalid value is
// ignored.
const envTraceParent = "TRACEPARENT"

// startSendSpan starts `notifyd send`'s client span when tracing is on —
// tracing.enabled with --config, else NOTIFYD_TRACING_ENABLED — as a child of
// $TRACEPARENT when set. The returned ctx carries the trace (the API call
// sends it as traceparent; --config stores it with the row); end records err,
// ends the span and flushes it. Off, ctx carries $TRACEPARENT alone, for the
// API to continue if its own tracing is on.
func startSendSpan(ctx context.Context, cfg *config.Config) (_ context.Context, on bool, end func(error)) {
	ctx = traceparent.ContextWith(ctx, os.Getenv(envTraceParent))
	tc := config.Default().Tracing
	if cfg != nil {
		tc = cfg.Tracing
	} else {
		tc.Enabled, _ = strconv.ParseBool(os.Getenv(config.EnvPrefix + "TRACING_ENABLED"))
	}
	p, err := tracing.New(ctx, tc, tracing.Options{Version: version.Version})
	if err != nil || p == nil {
		return ctx, false, func(error) {}
	}
	ctx, span := p.Tracer().Start(ctx, "notifyd send", trace.WithSpanKind(trace.SpanKindClient))
	return ctx, true, func(err error) {
		if err != nil {
			span.RecordError(err)
		}
		span.End()
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(fctx) // a lost span never fails the send
	}
}

// traceTransport sends the request context's trace as traceparent (and
// tracestate), so the API's span continues the caller's.
type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if trace.SpanContextFromContext(r.Context()).IsValid() {
		r = r.Clone(r.Context()) // a RoundTripper must not change its request
		propagation.TraceContext{}.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	}
	return t.base.RoundTrip(r)
}
