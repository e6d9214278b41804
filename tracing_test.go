package notifyd_test

import (
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	notifyd "github.com/notifyd/notifyd"
	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/fakesens"
	"github.com/notifyd/notifyd/internal/testenv"
	"github.com/notifyd/notifyd/sdk/client"
	"github.com/notifyd/notifyd/sdk/traceparent"
)

// otlpReceiver is an OTLP/HTTP trace receiver, as a collector or Jaeger
// runs one: POST /v1/traces with a protobuf ExportTraceServiceRequest.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string // the resource's service.name: which process sent it
	span    *tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP trace export", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := attr(rs.GetResource().GetAttributes(), "service.name").GetStringValue()
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans = append(o.spans, receivedSpan{service: service, span: s})
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// trace is every span received so far of the trace with id traceID (hex).
func (o *otlpReceiver) trace(traceID string) []receivedSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []receivedSpan
	for _, s := range o.spans {
		if hex.EncodeToString(s.span.TraceId) == traceID {
			out = append(out, s)
		}
	}
	return out
}

const tracingToken = "tracing-token-0123456789"

// startTraced runs notifyd with tracing on, the named plugin built from pkg,
// and channels, until the test ends; it returns the API's base URL and the
// database.
func startTraced(t *testing.T, plugin, pkg string, channels map[string]config.Channel) (string, *testenv.DB) {
	t.Helper()
	db := testenv.NewDB(t)
	rds := testenv.NewRedis(t)
	plugins := t.TempDir()
	testenv.InstallPlugin(t, plugins, plugin, pkg)
	cfg := config.Default()
	cfg.Postgres.URL, cfg.Redis.URL, cfg.Redis.Prefix = db.URL, rds.URL, rds.Prefix
	cfg.HTTP.Listen, cfg.HTTP.Tokens = "127.0.0.1:0", []string{tracingToken}
	cfg.Plugins.Dir = plugins
	cfg.Log.Level = "warn"
	cfg.Tracing.Enabled = true
	cfg.Channels = channels
	d, err := notifyd.Start(testenv.Context(t), &cfg, notifyd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop(testenv.Context(t)) })
	return fmt.Sprintf("http://%s", d.Addr()), db
}

// enqueueTraced POSTs body to the API with the given headers (a
// traceparent, say) and returns the status and, on 202, the answer.
func enqueueTraced(t *testing.T, addr, body string, headers map[string]string) (int, client.Enqueued) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, addr+"/v1/notifications", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tracingToken)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var enq client.Enqueued
	if resp.StatusCode == http.StatusAccepted {
		if err := json.NewDecoder(resp.Body).Decode(&enq); err != nil {
			t.Fatalf("enqueue: the 202's body: %v", err)
		}
	}
	return resp.StatusCode, enq
}

// startOTLP starts an OTLP/HTTP receiver and points the environment at it
// (t.Setenv: the daemon and the plugin processes it starts read OTEL_*),
// clearing the OTEL_* variables that would change what the test sees.
func startOTLP(t *testing.T) *otlpReceiver {
	otlp := &otlpReceiver{}
	collector := httptest.NewServer(otlp)
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // ms: spans arrive while the test polls
	for _, v := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_SERVICE_NAME",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(v, "")
	}
	return otlp
}

func attr(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// TestTracing_endToEnd: with tracing on and OTEL_EXPORTER_OTLP_ENDPOINT
// pointing at a real OTLP/HTTP receiver, one notification enqueued through
// the API with a caller's traceparent, failed transiently once by the
// webhook's receiver and then delivered, is ONE trace: the caller's span →
// the API's span → two attempt spans → the webhook plugin's span in each
// (sent from the plugin process) → the request the receiver got, whose
// traceparent names that plugin span.
func TestTracing_endToEnd(t *testing.T) {
	otlp := startOTLP(t)

	// The provider: 503 to a notification's first request, 200 after; every
	// traceparent kept, by webhook-id (msg_<notification id>).
	var (
		sinkMu  sync.Mutex
		parents = map[string][]string{}
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		sinkMu.Lock()
		msg := r.Header.Get("webhook-id")
		parents[msg] = append(parents[msg], r.Header.Get("traceparent"))
		first := len(parents[msg]) == 1
		sinkMu.Unlock()
		if first {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(sink.Close)

	addr, db := startTraced(t, "webhook", "./plugins/webhook", map[string]config.Channel{"hooks": {
		Plugin: "webhook", Config: map[string]any{"url": sink.URL},
		Retry: config.Retry{MaxAttempts: 3, Base: 50 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: config.JitterNone},
	}})

	// The application's request, in its own trace; a tracestate rides along.
	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
	)
	status, enq := enqueueTraced(t, addr, `{"channel":"hooks","recipient":"ada","payload":{"text":"hi"}}`,
		map[string]string{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01", "tracestate": "app=1"})
	if status != http.StatusAccepted {
		t.Fatalf("enqueue: %d, want 202", status)
	}

	// A second enqueue with a garbage traceparent: accepted, and a trace of
	// its own (the API's span is its root).
	if status, _ := enqueueTraced(t, addr, `{"channel":"hooks","recipient":"bob","payload":{}}`,
		map[string]string{"traceparent": "00-zzzz-" + strings.Repeat("9", 300)}); status != http.StatusAccepted {
		t.Fatalf("enqueue with a garbage traceparent: %d, want 202", status)
	}

	c, err := client.New(addr, tracingToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := c.Notification(ctx, enq.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n.Status == "SENT" {
			if n.Attempts != 2 {
				t.Fatalf("notification %d SENT after %d attempts, want 2 (the receiver fails the first)", enq.ID, n.Attempts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("notification %d is %s after 30 s (%q), want SENT", enq.ID, n.Status, n.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var stored *string
	if err := db.Pool.QueryRow(ctx, `SELECT trace_parent FROM notifications WHERE id = $1`, enq.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored == nil || !strings.HasPrefix(*stored, "00-"+callerTrace+"-") {
		t.Fatalf("trace_parent = %v, want the caller's trace %s", stored, callerTrace)
	}

	// Wait for the whole trace: the API's span, two attempts, two plugin spans.
	var spans []receivedSpan
	byName := map[string][]receivedSpan{}
	deadline = time.Now().Add(30 * time.Second)
	for {
		spans = otlp.trace(callerTrace)
		clear(byName)
		for _, s := range spans {
			byName[s.span.Name] = append(byName[s.span.Name], s)
		}
		if len(byName["POST /v1/notifications"]) == 1 && len(byName["notifyd.deliver"]) == 2 && len(byName["notifyd.plugin.send"]) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the receiver holds %d spans of trace %s: %v; want the API's, two notifyd.deliver and two notifyd.plugin.send",
				len(spans), callerTrace, names(spans))
		}
		time.Sleep(20 * time.Millisecond)
	}
	id := func(b []byte) string { return hex.EncodeToString(b) }
	apiSpan := byName["POST /v1/notifications"][0]
	if got := id(apiSpan.span.ParentSpanId); got != callerSpan || apiSpan.service != "notifyd" {
		t.Errorf("API span: parent %s from %q, want the caller's span %s from notifyd", got, apiSpan.service, callerSpan)
	}
	attempts := map[int64]receivedSpan{}
	for _, s := range byName["notifyd.deliver"] {
		n := attr(s.span.Attributes, "notifyd.attempt").GetIntValue()
		attempts[n] = s
		if got := id(s.span.ParentSpanId); got != id(apiSpan.span.SpanId) {
			t.Errorf("attempt %d: parent %s, want the API's span %s", n, got, id(apiSpan.span.SpanId))
		}
		if got := attr(s.span.Attributes, "notifyd.notification.id").GetIntValue(); got != enq.ID {
			t.Errorf("attempt %d: notification id %d, want %d", n, got, enq.ID)
		}
		if attr(s.span.Attributes, "notifyd.channel").GetStringValue() != "hooks" {
			t.Errorf("attempt %d: channel attribute missing", n)
		}
		for _, kv := range s.span.Attributes {
			if v := kv.Value.GetStringValue(); strings.Contains(v, "ada") || strings.Contains(v, `"text"`) {
				t.Errorf("attempt %d: attribute %s = %q carries the recipient or payload", n, kv.Key, v)
			}
		}
	}
	for n, want := range map[int64]struct {
		outcome string
		status  int64
	}{1: {"TRANSIENT", 503}, 2: {"SUCCESS", 200}} {
		s, ok := attempts[n]
		if !ok {
			t.Fatalf("no span for attempt %d among %v", n, names(spans))
		}
		if got := attr(s.span.Attributes, "notifyd.outcome").GetStringValue(); got != want.outcome {
			t.Errorf("attempt %d: outcome %q, want %q", n, got, want.outcome)
		}
		if got := attr(s.span.Attributes, "notifyd.provider.status").GetIntValue(); got != want.status {
			t.Errorf("attempt %d: provider status %d, want %d", n, got, want.status)
		}
	}
	// Each attempt's plugin span comes from the plugin process, under it; the
	// receiver's request names that plugin span as its parent.
	sinkMu.Lock()
	got := append([]string(nil), parents[fmt.Sprintf("msg_%d", enq.ID)]...)
	sinkMu.Unlock()
	if len(got) != 2 {
		t.Fatalf("the receiver got %d requests, want 2", len(got))
	}
	pluginSpans := map[string]receivedSpan{}
	for _, s := range byName["notifyd.plugin.send"] {
		pluginSpans[id(s.span.SpanId)] = s
		if s.service != "notifyd-plugin-webhook" {
			t.Errorf("plugin span from service %q, want notifyd-plugin-webhook (the plugin process)", s.service)
		}
	}
	for i, tp := range got {
		sc, ok := traceparent.Parse(tp)
		if !ok || sc.TraceID().String() != callerTrace {
			t.Errorf("request %d: traceparent %q, want one in trace %s", i+1, tp, callerTrace)
			continue
		}
		ps, ok := pluginSpans[sc.SpanID().String()]
		if !ok {
			t.Errorf("request %d: traceparent %q names no plugin span", i+1, tp)
			continue
		}
		attempt := attempts[int64(i+1)]
		if id(ps.span.ParentSpanId) != id(attempt.span.SpanId) {
			t.Errorf("request %d: its plugin span's parent is %s, want attempt %d's span %s",
				i+1, id(ps.span.ParentSpanId), i+1, id(attempt.span.SpanId))
		}
	}
}

func names(spans []receivedSpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.service + ":" + s.span.Name
	}
	return out
}

// TestTracing_batchSender: a plugin that takes many recipients per request
// (the Kakao plugin's AlimTalk mode, a BatchSender, against a fake SENS)
// still gives each traced notification its own plugin span: three
// notifications in three traces, one SendBatch call or several, and each
// trace holds a notifyd.plugin.send span from the plugin process whose
// parent is that notification's attempt span.
func TestTracing_batchSender(t *testing.T) {
	otlp := startOTLP(t)
	partner, err := fakesens.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = partner.Close() })
	partner.Templates["hello"] = "Hello, #{name}!"

	addr, _ := startTraced(t, "kakao", "./plugins/kakao", map[string]config.Channel{"alimtalk": {
		Plugin: "kakao",
		Config: map[string]any{
			"mode":     "alimtalk",
			"alimtalk": partner.Alimtalk("hello", "accepted"),
			"template": map[string]any{"content": "Hello, {{.name}}!"},
		},
	}})
	c, err := client.New(addr, tracingToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)

	traces := map[int64]string{} // notification id → its trace
	for i, name := range []string{"Ada", "Bo", "Cy"} {
		tr := fmt.Sprintf("%032x", 0xabc0+i)
		status, enq := enqueueTraced(t, addr, fmt.Sprintf(`{"channel":"alimtalk","recipient":"010-1234-%04d","payload":{"name":%q}}`, i, name),
			map[string]string{"traceparent": "00-" + tr + "-00f067aa0ba902b7-01"})
		if status != http.StatusAccepted {
			t.Fatalf("enqueue: %d, want 202", status)
		}
		traces[enq.ID] = tr
	}
	deadline := time.Now().Add(30 * time.Second)
	for id := range traces {
		for {
			n, err := c.Notification(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if n.Status == "SENT" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("notification %d is %s after 30 s (%q), want SENT", id, n.Status, n.LastError)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	hexID := func(b []byte) string { return hex.EncodeToString(b) }
	for id, tr := range traces {
		var attempt, plugin *receivedSpan
		for {
			for _, s := range otlp.trace(tr) {
				switch s.span.Name {
				case "notifyd.deliver":
					attempt = &s
				case "notifyd.plugin.send":
					plugin = &s
				}
			}
			if attempt != nil && plugin != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("notification %d: after 30 s trace %s holds %v; want an attempt span and the plugin's span under it",
					id, tr, names(otlp.trace(tr)))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if plugin.service != "notifyd-plugin-kakao" || hexID(plugin.span.ParentSpanId) != hexID(attempt.span.SpanId) {
			t.Errorf("notification %d: plugin span from %q under %s, want from notifyd-plugin-kakao under the attempt span %s",
				id, plugin.service, hexID(plugin.span.ParentSpanId), hexID(attempt.span.SpanId))
		}
		if got := attr(plugin.span.Attributes, "notifyd.notification.id").GetIntValue(); got != id {
			t.Errorf("notification %d: the plugin span names notification %d", id, got)
		}
		if n := attr(plugin.span.Attributes, "notifyd.batch.size").GetIntValue(); n < 1 || n > 3 {
			t.Errorf("notification %d: notifyd.batch.size %d, want 1-3", id, n)
		}
	}
}
