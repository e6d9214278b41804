package sdk_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/proto/providerv1"
	"github.com/notifyd/notifyd/sdk/wire"
)

// A provider whose every result is within what the host stores
// (wire.MaxResultBytes, 4 MiB: embeddings, say) answers a host call of 20
// messages: each verdict is legal, their sum (80 MiB) is past the
// protocol's bound on one answer (providerv1.MaxMessageBytes). The SDK sent
// it whole, gRPC refused it, and the host took all 20 — delivered, every
// one — for an unknown outcome: each was sent again. The answer is held to
// the protocol's bound now: every message keeps its outcome, the results
// that do not fit are replaced by a note saying so.
func TestServe_AnswerWithinProtocolBound(t *testing.T) {
	t.Parallel()
	result := json.RawMessage(`"` + strings.Repeat("e", wire.MaxResultBytes-2) + `"`)
	c := serve(t, &fixture{info: sdk.Info{Name: "embed"}, configure: senderFor(sdk.SenderFunc(
		func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(result) }))})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ms := messages(20, time.Now().Add(time.Minute))
	vs, err := c.Send(ctx, ms)
	if err != nil {
		t.Fatalf("Send: the whole call failed (%.200v): its 20 delivered messages are then sent again as outcome unknown", err)
	}
	total, kept := 0, 0
	for i, v := range vs {
		if v.Outcome != sdk.OutcomeSuccess {
			t.Errorf("verdict %d: %v %q, want SUCCESS", i, v.Outcome, v.Detail)
		}
		if !json.Valid(v.Result) {
			t.Errorf("verdict %d: result is not JSON (%.80q)", i, v.Result)
		}
		total += len(v.Result)
		if len(v.Result) == len(result) {
			kept++
		}
	}
	if total > providerv1.MaxMessageBytes {
		t.Errorf("results total %d bytes, past the protocol's %d", total, providerv1.MaxMessageBytes)
	}
	if kept == 0 {
		t.Errorf("no result kept: only those that do not fit should be dropped")
	}
}

// A result past what the host stores (wire.MaxResultBytes) travelled whole
// to the host, which only replaced it with a note of its size: 40 MiB moved
// and held on both sides for nothing. The SDK replaces it with the note.
func TestServe_ResultPastStoredBoundNotSent(t *testing.T) {
	t.Parallel()
	result := json.RawMessage(`"` + strings.Repeat("e", 40<<20) + `"`)
	c := serve(t, &fixture{info: sdk.Info{Name: "big"}, configure: senderFor(sdk.SenderFunc(
		func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(result) }))})
	vs := send(t, c, messages(1, time.Now().Add(time.Minute)))
	wantOutcome(t, vs, 0, sdk.OutcomeSuccess, "")
	if len(vs[0].Result) > wire.MaxResultBytes || !json.Valid(vs[0].Result) || !strings.Contains(string(vs[0].Result), "bytes") {
		t.Errorf("result: %d bytes (%.120q), want a JSON note of its size", len(vs[0].Result), vs[0].Result)
	}
}

// A Send that panics with a long value (an error quoting a provider's whole
// answer): the panic's verdict was the one verdict not held to the SDK's
// bounds, its detail the value whole. At 65 MiB the answer was past the
// protocol's bound and the call failed, so its batch-mate, delivered, was
// sent again.
func TestServe_PanicDetailBounded(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("p", 65<<20)
	c := serve(t, &fixture{info: sdk.Info{Name: "panicky"}, configure: senderFor(sdk.SenderFunc(
		func(_ context.Context, m sdk.Message) sdk.Verdict {
			if m.ID == 2 {
				panic(huge)
			}
			return sdk.Success(nil)
		}))})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vs, err := c.Send(ctx, messages(2, time.Now().Add(time.Minute)))
	if err != nil {
		t.Fatalf("Send: the whole call failed (%.200v): message 1, delivered, is then sent again", err)
	}
	wantOutcome(t, vs, 0, sdk.OutcomeSuccess, "")
	wantOutcome(t, vs, 1, sdk.OutcomeTransient, sdk.DetailPanic)
	if n := len(vs[1].Detail); n > wire.MaxErrorLen {
		t.Errorf("panic verdict's detail is %d bytes", n)
	}
}

// A BatchSender that panics with a 256 KiB value in a call of 1,000
// messages: the SDK formatted the panic's text once per message, 256 MiB
// allocated (and held until each was cut) for one panic. Formatted once.
// Not parallel: it measures the process's allocations.
func TestServe_BatchPanicFormattedOnce(t *testing.T) {
	val := strings.Repeat("q", 256<<10)
	c := serve(t, &fixture{info: sdk.Info{Name: "batchpanic"}, configure: senderFor(batcher{
		SenderFunc: func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) },
		batch:      func(context.Context, []sdk.Message) []sdk.Verdict { panic(val) },
	})})
	ms := messages(1000, time.Now().Add(time.Minute))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	vs := send(t, c, ms)
	runtime.ReadMemStats(&after)
	for i := range vs {
		wantOutcome(t, vs, i, sdk.OutcomeTransient, sdk.DetailPanic)
	}
	// The bound is generous: a quarter of what formatting per message took.
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("one panic of %d KiB in a call of %d messages allocated %d MiB", len(val)>>10, len(ms), got>>20)
	}
}

// hangs is a Sender whose provider health check ignores its context (a
// call made without it) and never returns.
type hangs struct {
	sdk.SenderFunc
	block chan struct{}
}

func (h hangs) Health(context.Context) error { <-h.block; return nil }

// A provider health check that ignores its context: the SDK answered each
// Health call at its deadline ("did not answer in time") but left the
// check's goroutine behind, one more for every /readyz probe and dashboard
// page (the host asks on each), for the life of the process — which the
// stuck-call check, counting sends only, never replaced. One check a
// channel runs at a time now; a call meanwhile waits for it.
//
// Not parallel: it counts the process's goroutines.
func TestServe_HungHealthCheckRunsOnce(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	c := serve(t, &fixture{info: sdk.Info{Name: "hung"}, configure: senderFor(hangs{
		SenderFunc: func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) },
		block:      block,
	})})
	before := runtime.NumGoroutine()
	const probes = 50
	for range probes {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		unhealthy, err := c.Health(ctx)
		cancel()
		if err == nil && unhealthy["ch"] == "" {
			t.Fatalf("Health: the hung check reads healthy (%v)", unhealthy)
		}
	}
	// Goroutines of gRPC's own come and go: wait for them to settle.
	var leaked int
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if leaked = runtime.NumGoroutine() - before; leaked < probes/5 {
			return
		}
	}
	t.Errorf("%d health calls against a check that never returns left %d more goroutines", probes, leaked)
}
