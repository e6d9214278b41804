// Package tracing builds notifyd's OpenTelemetry tracer provider from the
// tracing config and the standard OTEL_* environment (docs/design.md §11):
// spans go out over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT, …_TRACES_ENDPOINT,
// …_HEADERS, …), the resource says OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (service.name "notifyd" otherwise), and
// OTEL_TRACES_SAMPLER, when set, replaces tracing.sample_ratio.
//
// Off — tracing.enabled false, OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none — there is no provider at all: Tracer returns nil
// and every caller checks for nil before doing any per-message work, so the
// hot path pays one comparison. Nothing is made global: the provider is
// passed down from the composition root.
package tracing

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/notifyd/notifyd/config"
)

// ScopeName names the instrumentation scope of every notifyd span.
const ScopeName = "github.com/notifyd/notifyd"

// Provider is a running tracer provider; a nil *Provider is tracing off.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Options are what the environment and the caller add to the config.
type Options struct {
	// Getenv reads the environment; os.Getenv when nil.
	Getenv func(string) string
	// Service is service.name unless OTEL_SERVICE_NAME (or service.name in
	// OTEL_RESOURCE_ATTRIBUTES) says otherwise; "notifyd" when empty.
	Service string
	Version string
	// Exporter replaces the OTLP exporter (tests); nil: OTLP/HTTP.
	Exporter sdktrace.SpanExporter
}

// New starts a tracer provider when cfg and the environment turn tracing on,
// and returns nil (off) otherwise. The exporter connects lazily: an
// unreachable receiver never stops notifyd, it loses spans.
func New(ctx context.Context, cfg config.Tracing, o Options) (*Provider, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if !On(cfg, getenv) {
		return nil, nil
	}
	exp := o.Exporter
	if exp == nil {
		var err error
		if exp, err = otlptracehttp.New(ctx); err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithBatcher(exp), // OTEL_BSP_* tune it
		sdktrace.WithResource(serviceResource(o)),
	}
	if getenv("OTEL_TRACES_SAMPLER") == "" {
		// A caller's decision stands (its sampled flag); sample_ratio picks
		// among the traces notifyd starts itself.
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))))
	}
	return &Provider{tp: sdktrace.NewTracerProvider(opts...)}, nil
}

// On says whether cfg and the environment turn tracing on.
func On(cfg config.Tracing, getenv func(string) string) bool {
	if !cfg.Enabled {
		return false
	}
	if off, _ := strconv.ParseBool(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))); off {
		return false
	}
	return !strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none")
}

// Tracer is notifyd's tracer, or nil when p is nil (tracing off).
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tp.Tracer(ScopeName)
}

// TracerProvider is the provider, or nil when p is nil.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.tp
}

// Shutdown exports what is buffered, bounded by ctx, and stops. Nil-safe.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// serviceResource: service.name and version as notifyd knows them, then the
// environment's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over them.
func serviceResource(o Options) *resource.Resource {
	name := o.Service
	if name == "" {
		name = "notifyd"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	r, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		r = resource.NewSchemaless(attrs...)
	}
	if env, err := resource.Merge(r, resource.Environment()); err == nil {
		r = env
	}
	return r
}

// Attribute keys of notifyd's spans (the SDK's plugin span uses the same).
// Never a recipient, payload or idempotency key: spans leave the process.
const (
	AttrNotificationID = attribute.Key("notifyd.notification.id")
	AttrChannel        = attribute.Key("notifyd.channel")
	AttrPlugin         = attribute.Key("notifyd.plugin")
	AttrAttempt        = attribute.Key("notifyd.attempt")
	AttrOutcome        = attribute.Key("notifyd.outcome")
	AttrResult         = attribute.Key("notifyd.result")
	AttrProviderStatus = attribute.Key("notifyd.provider.status")
	AttrProviderCode   = attribute.Key("notifyd.provider.code")
	AttrNotifications  = attribute.Key("notifyd.notifications")
)
