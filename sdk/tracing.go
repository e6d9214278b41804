package sdk

import (
	"context"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/sdk/traceparent"
)

// tracing is the plugin's side of trace propagation (docs/design.md §11):
// every traced message's Send gets a ctx whose parent span context is the
// host's delivery attempt. A span of the SDK's own, per message, is recorded
// only when the plugin process exports spans (tracer set): Serve sets that
// up when the environment names an OTLP endpoint (see setupTracing).
type tracing struct {
	plugin string
	tracer trace.Tracer // nil: propagate only
}

// start returns the ctx m's Send runs with, and the SDK's span for it (nil
// when spans are not recorded here). Only called for a traced message.
func (t tracing) start(ctx context.Context, m *Message) (context.Context, trace.Span) {
	ctx = traceparent.ContextWith(ctx, m.TraceParent)
	if t.tracer == nil {
		return ctx, nil
	}
	// No recipient, payload or key: spans leave the process, and those are
	// personal data or secrets.
	return t.tracer.Start(ctx, "notifyd.plugin.send", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("notifyd.plugin", t.plugin),
			attribute.String("notifyd.channel", m.Channel),
			attribute.Int64("notifyd.notification.id", m.ID),
			attribute.Int("notifyd.attempt", m.Attempt),
		))
}

// startBatch starts the SDK's span of each traced message of a SendBatch
// call, as start does for a Send, and sets the message's TraceParent to it.
// It returns one span per message, nil for an untraced one; all nil when
// spans are not recorded here (the messages keep the host's TraceParent).
func (t tracing) startBatch(ctx context.Context, ms []Message) []trace.Span {
	spans := make([]trace.Span, len(ms))
	if t.tracer == nil {
		return spans
	}
	for k := range ms {
		if ms[k].TraceParent == "" {
			continue
		}
		_, span := t.start(ctx, &ms[k])
		span.SetAttributes(attribute.Int("notifyd.batch.size", len(ms)))
		spans[k] = span
		if sc := span.SpanContext(); sc.IsValid() {
			ms[k].TraceParent = traceparent.Format(sc)
		}
	}
	return spans
}

// end records the verdict on span and ends it. A verdict's Detail is left
// out: a provider's words may quote what was sent.
func (tracing) end(span trace.Span, v Verdict) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("notifyd.outcome", v.Outcome.String()))
	if v.ProviderStatus != 0 {
		span.SetAttributes(attribute.Int("notifyd.provider.status", v.ProviderStatus))
	}
	if v.ProviderCode != "" {
		span.SetAttributes(attribute.String("notifyd.provider.code", v.ProviderCode))
	}
	if v.Outcome != OutcomeSuccess {
		span.SetStatus(codes.Error, v.Outcome.String())
	}
	span.End()
}

// setupTracing prepares a plugin process: it installs the W3C Trace Context
// propagator as OpenTelemetry's global one (so a plugin's own instrumented
// HTTP client sends traceparent), and — when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, which a plugin inherits from
// the host's environment — an OTLP/HTTP exporter and tracer provider
// configured by the standard OTEL_* variables, made global too so the
// plugin's own spans go out with the SDK's. OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn the exporter off. shutdown flushes what is
// buffered; it is never nil.
func setupTracing(info Info, log hclog.Logger) (tracing, func(context.Context)) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t := tracing{plugin: info.Name}
	noop := func(context.Context) {}
	if !exportWanted(os.Getenv) {
		return t, noop
	}
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx) // endpoint, headers, timeout, TLS: OTEL_EXPORTER_OTLP_*
	if err != nil {
		log.Warn("tracing: no OTLP exporter; messages' traces still reach Send's ctx", "error", err)
		return t, noop
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(exp), // OTEL_BSP_* tune it
		sdktrace.WithResource(pluginResource(info)),
	}
	if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		// The host decided whether the attempt is sampled; the plugin follows
		// and never starts a trace of its own.
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	t.tracer = tp.Tracer("github.com/notifyd/notifyd/sdk")
	log.Debug("tracing: exporting spans over OTLP/HTTP")
	return t, func(ctx context.Context) {
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: flush spans at exit", "error", err)
		}
	}
}

// exportWanted says the environment asks for spans to be exported.
func exportWanted(getenv func(string) string) bool {
	if off, _ := strconv.ParseBool(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))); off {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// pluginResource names the process notifyd-plugin-<name> unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise.
func pluginResource(info Info) *resource.Resource {
	own := resource.NewSchemaless(
		attribute.String("service.name", "notifyd-plugin-"+info.Name),
		attribute.String("service.version", info.Version),
	)
	r, err := resource.Merge(resource.Default(), own)
	if err != nil {
		r = own
	}
	if env, err := resource.Merge(r, resource.Environment()); err == nil {
		r = env
	}
	return r
}
