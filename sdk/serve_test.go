package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// fixture is a provider whose channels are built by the test.
type fixture struct {
	info      sdk.Info
	configure func(ctx context.Context, req sdk.ConfigureRequest) (sdk.Sender, error)
}

func (f *fixture) Describe() sdk.Info { return f.info }

func (f *fixture) Configure(ctx context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	return f.configure(ctx, req)
}

func senderFor(s sdk.Sender) func(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return func(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) { return s, nil }
}

// serve runs p in-process over real gRPC and configures channel "ch".
func serve(t *testing.T, p sdk.Provider) *providerclient.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	attach, closed, err := sdk.ServeInProcess(ctx, p, nil)
	if err != nil {
		cancel()
		t.Fatalf("ServeInProcess: %v", err)
	}
	pc, c, err := providerclient.Attach(attach, nil)
	if err != nil {
		cancel()
		t.Fatalf("Attach: %v", err)
	}
	t.Cleanup(func() { pc.Kill(); cancel(); <-closed })
	if err := c.Configure(context.Background(), "ch", json.RawMessage(`{"path":"ch"}`)); err != nil {
		t.Fatalf("Configure(ch): %v", err)
	}
	return c
}

func messages(n int, deadline time.Time) []sdk.Message {
	ms := make([]sdk.Message, n)
	for i := range ms {
		ms[i] = sdk.Message{ID: int64(i + 1), Channel: "ch", Recipient: fmt.Sprint("r", i+1), Payload: json.RawMessage(`{}`), Attempt: 1, Deadline: deadline}
	}
	return ms
}

func send(t *testing.T, c *providerclient.Client, ms []sdk.Message) []sdk.Verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vs, err := c.Send(ctx, ms)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if len(vs) != len(ms) {
		t.Fatalf("Send: got %d verdicts, want %d", len(vs), len(ms))
	}
	return vs
}

func wantOutcome(t *testing.T, vs []sdk.Verdict, i int, want sdk.Outcome, detail string) {
	t.Helper()
	if vs[i].Outcome != want || !strings.Contains(vs[i].Detail, detail) {
		t.Errorf("verdict %d: got %v %q, want %v containing %q", i, vs[i].Outcome, vs[i].Detail, want, detail)
	}
}

func TestServe_Send(t *testing.T) {
	t.Parallel()

	t.Run("fans out under MaxConcurrency", func(t *testing.T) {
		t.Parallel()
		var cur, peak atomic.Int64
		c := serve(t, &fixture{info: sdk.Info{Name: "fan", MaxConcurrency: 4}, configure: senderFor(sdk.SenderFunc(
			func(ctx context.Context, m sdk.Message) sdk.Verdict {
				n := cur.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(5 * time.Millisecond)
				cur.Add(-1)
				return sdk.Success(json.RawMessage(fmt.Sprintf(`{"id":%d}`, m.ID)))
			}))})
		vs := send(t, c, messages(32, time.Now().Add(time.Minute)))
		for i, v := range vs {
			if want := fmt.Sprintf(`{"id":%d}`, i+1); v.Outcome != sdk.OutcomeSuccess || string(v.Result) != want {
				t.Errorf("verdict %d: got %v %s, want SUCCESS %s (in order)", i, v.Outcome, v.Result, want)
			}
		}
		if got := peak.Load(); got != 4 {
			t.Errorf("peak concurrent Sends: got %d, want 4", got)
		}
	})

	t.Run("a panic costs only its message", func(t *testing.T) {
		t.Parallel()
		c := serve(t, &fixture{info: sdk.Info{Name: "panicky"}, configure: senderFor(sdk.SenderFunc(
			func(ctx context.Context, m sdk.Message) sdk.Verdict {
				if m.ID == 3 {
					panic("boom")
				}
				return sdk.Success(nil)
			}))})
		vs := send(t, c, messages(5, time.Now().Add(time.Minute)))
		for i := range vs {
			if i == 2 {
				wantOutcome(t, vs, i, sdk.OutcomeTransient, sdk.DetailPanic+": boom")
			} else {
				wantOutcome(t, vs, i, sdk.OutcomeSuccess, "")
			}
		}
	})

	t.Run("a hung Send is TRANSIENT at its deadline", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		c := serve(t, &fixture{info: sdk.Info{Name: "hang"}, configure: senderFor(sdk.SenderFunc(
			func(ctx context.Context, m sdk.Message) sdk.Verdict {
				if m.ID == 2 {
					<-release // ignores ctx on purpose
				}
				return sdk.Success(nil)
			}))})
		vs := send(t, c, messages(3, time.Now().Add(300*time.Millisecond)))
		wantOutcome(t, vs, 0, sdk.OutcomeSuccess, "")
		wantOutcome(t, vs, 1, sdk.OutcomeTransient, sdk.DetailDeadline)
		wantOutcome(t, vs, 2, sdk.OutcomeSuccess, "")
	})

	t.Run("a message whose deadline passes while queued is never sent", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		var calls sync.Map
		c := serve(t, &fixture{info: sdk.Info{Name: "queue", MaxConcurrency: 1}, configure: senderFor(sdk.SenderFunc(
			func(ctx context.Context, m sdk.Message) sdk.Verdict {
				calls.Store(m.ID, true)
				<-release
				return sdk.Success(nil)
			}))})
		vs := send(t, c, messages(3, time.Now().Add(200*time.Millisecond)))
		for i := range vs {
			wantOutcome(t, vs, i, sdk.OutcomeTransient, sdk.DetailDeadline)
		}
		time.Sleep(50 * time.Millisecond) // let a wrongly started Send show up
		for id := int64(2); id <= 3; id++ {
			if _, ok := calls.Load(id); ok {
				t.Errorf("message %d: Send was called after its deadline passed in the queue", id)
			}
		}
	})

	t.Run("an invalid verdict is TRANSIENT", func(t *testing.T) {
		t.Parallel()
		c := serve(t, &fixture{info: sdk.Info{Name: "invalid"}, configure: senderFor(sdk.SenderFunc(
			func(ctx context.Context, m sdk.Message) sdk.Verdict {
				switch m.ID {
				case 1:
					return sdk.Verdict{} // zero outcome
				case 2:
					return sdk.Success(json.RawMessage(`{not json`))
				default:
					return sdk.Permanent("bad recipient").WithStatus(400).WithCode("-401").WithRetryAfter(-time.Second)
				}
			}))})
		vs := send(t, c, messages(3, time.Now().Add(time.Minute)))
		wantOutcome(t, vs, 0, sdk.OutcomeTransient, sdk.DetailInvalidVerdict+" (outcome 0)")
		// Delivered stays delivered: retrying would send it twice.
		wantOutcome(t, vs, 1, sdk.OutcomeSuccess, "result dropped: not valid JSON")
		if vs[1].Result != nil {
			t.Errorf("verdict 1 result: got %s, want none", vs[1].Result)
		}
		got := vs[2]
		if got.Outcome != sdk.OutcomePermanent || got.ProviderStatus != 400 || got.ProviderCode != "-401" || got.RetryAfter != 0 || got.Detail != "bad recipient" {
			t.Errorf("verdict 2: got %+v, want PERMANENT 400 -401 retry 0 %q", got, "bad recipient")
		}
	})

	t.Run("an unconfigured channel is TRANSIENT", func(t *testing.T) {
		t.Parallel()
		c := serve(t, &fixture{info: sdk.Info{Name: "route"}, configure: senderFor(sdk.SenderFunc(
			func(ctx context.Context, m sdk.Message) sdk.Verdict { return sdk.Success(nil) }))})
		ms := messages(2, time.Now().Add(time.Minute))
		ms[1].Channel = "other"
		vs := send(t, c, ms)
		wantOutcome(t, vs, 0, sdk.OutcomeSuccess, "")
		wantOutcome(t, vs, 1, sdk.OutcomeTransient, sdk.DetailNotConfigured+": other")
	})

	t.Run("an empty batch", func(t *testing.T) {
		t.Parallel()
		c := serve(t, &fixture{info: sdk.Info{Name: "empty"}, configure: senderFor(sdk.SenderFunc(
			func(ctx context.Context, m sdk.Message) sdk.Verdict { return sdk.Success(nil) }))})
		if vs, err := c.Send(context.Background(), nil); err != nil || len(vs) != 0 {
			t.Errorf("Send(nil): got %v, %v; want no verdicts, no error", vs, err)
		}
	})
}

// batcher is a BatchSender whose answer the test picks.
type batcher struct {
	sdk.SenderFunc
	batch func(ctx context.Context, ms []sdk.Message) []sdk.Verdict
}

func (b batcher) SendBatch(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
	return b.batch(ctx, ms)
}

func TestServe_SendBatch(t *testing.T) {
	t.Parallel()
	never := sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { panic("Send called on a BatchSender") })
	tests := []struct {
		name  string
		batch func(ctx context.Context, ms []sdk.Message) []sdk.Verdict
		want  []sdk.Outcome
		wantD string
	}{
		{"one call per batch", func(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
			vs := make([]sdk.Verdict, len(ms))
			for i := range ms {
				vs[i] = sdk.Success(json.RawMessage(fmt.Sprintf(`[%d]`, len(ms))))
			}
			vs[1] = sdk.Permanent("input too long")
			return vs
		}, []sdk.Outcome{sdk.OutcomeSuccess, sdk.OutcomePermanent, sdk.OutcomeSuccess}, ""},
		{"wrong count", func(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
			return []sdk.Verdict{sdk.Success(nil)}
		}, []sdk.Outcome{sdk.OutcomeTransient, sdk.OutcomeTransient, sdk.OutcomeTransient}, "SendBatch returned 1 verdicts for 3 messages"},
		{"panic", func(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
			panic("kaboom")
		}, []sdk.Outcome{sdk.OutcomeTransient, sdk.OutcomeTransient, sdk.OutcomeTransient}, "kaboom"},
		{"hang", func(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
			<-ctx.Done()
			time.Sleep(100 * time.Millisecond) // overrun even the context
			return []sdk.Verdict{sdk.Success(nil), sdk.Success(nil), sdk.Success(nil)}
		}, []sdk.Outcome{sdk.OutcomeTransient, sdk.OutcomeTransient, sdk.OutcomeTransient}, sdk.DetailDeadline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := serve(t, &fixture{info: sdk.Info{Name: "batch"}, configure: senderFor(batcher{never, tt.batch})})
			vs := send(t, c, messages(3, time.Now().Add(300*time.Millisecond)))
			for i, want := range tt.want {
				wantOutcome(t, vs, i, want, tt.wantD)
			}
			if tt.name == "one call per batch" && string(vs[0].Result) != "[3]" {
				t.Errorf("result: got %s, want [3] (all messages in one call)", vs[0].Result)
			}
		})
	}
}

type healthy struct {
	sdk.SenderFunc
	err error
}

func (h healthy) Health(context.Context) error { return h.err }

func TestServe_Configure(t *testing.T) {
	t.Parallel()
	ok := sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) })
	c := serve(t, &fixture{info: sdk.Info{Name: "cfg"}, configure: func(ctx context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
		var cfg struct {
			Path  string `json:"path"`
			Down  string `json:"down"`
			Panic bool   `json:"panic"`
			Nil   bool   `json:"nil"`
		}
		if err := req.Decode(&cfg); err != nil {
			return nil, err
		}
		switch {
		case cfg.Panic:
			panic("config panic")
		case cfg.Nil:
			return nil, nil
		case cfg.Down != "":
			return healthy{ok, errors.New(cfg.Down)}, nil
		case cfg.Path == "":
			return nil, errors.New("config.path is required")
		}
		return ok, nil
	}})
	ctx := context.Background()

	t.Run("rejections carry the plugin's own message", func(t *testing.T) {
		for cfg, want := range map[string]string{
			`{}`:                `config.path is required`,
			`{"paht":"x"}`:      `config: unknown key "paht"`,
			`{"path":1}`:        `config.path: want string, got number`,
			`{"panic":true}`:    `plugin panicked in Configure: config panic`,
			`{"nil":true}`:      `plugin returned neither a Sender nor an error`,
			`{"path":"x"} junk`: `config: unexpected data after the JSON object`,
		} {
			err := c.Configure(ctx, "bad", json.RawMessage(cfg))
			var ce *providerclient.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(ce.Message, want) || ce.Channel != "bad" {
				t.Errorf("Configure(%s): got %v, want a ConfigError for channel bad containing %q", cfg, err, want)
			}
		}
	})

	t.Run("a rejected reconfigure stops only that channel", func(t *testing.T) {
		if err := c.Configure(ctx, "a", json.RawMessage(`{"path":"x"}`)); err != nil {
			t.Fatalf("Configure(a): %v", err)
		}
		if err := c.Configure(ctx, "b", json.RawMessage(`{"path":"y"}`)); err != nil {
			t.Fatalf("Configure(b): %v", err)
		}
		if err := c.Configure(ctx, "a", json.RawMessage(`{}`)); err == nil {
			t.Fatal("Configure(a, {}): got nil, want the required-path error")
		}
		ms := messages(2, time.Now().Add(time.Minute))
		ms[0].Channel, ms[1].Channel = "a", "b"
		vs := send(t, c, ms)
		wantOutcome(t, vs, 0, sdk.OutcomeTransient, sdk.DetailNotConfigured)
		wantOutcome(t, vs, 1, sdk.OutcomeSuccess, "")
	})

	t.Run("health reports per channel", func(t *testing.T) {
		if err := c.Configure(ctx, "down", json.RawMessage(`{"down":"provider unreachable"}`)); err != nil {
			t.Fatalf("Configure(down): %v", err)
		}
		unhealthy, err := c.Health(ctx)
		if err != nil {
			t.Fatalf("Health: %v", err)
		}
		if got, want := providerclient.HealthError(unhealthy), "channel down: provider unreachable"; got == nil || got.Error() != want {
			t.Errorf("Health: got %v, want %q", got, want)
		}
	})
}

func TestServeInProcess_BadInfo(t *testing.T) {
	t.Parallel()
	for name, info := range map[string]sdk.Info{
		"empty Name":      {},
		"negative limit":  {Name: "x", MaxConcurrency: -1},
		"schema not JSON": {Name: "x", ConfigSchema: json.RawMessage(`{`)},
	} {
		_, _, err := sdk.ServeInProcess(context.Background(), &fixture{info: info}, nil)
		if err == nil {
			t.Errorf("%s: got nil error, want a Describe error", name)
		}
	}
}

// TestServeInProcess_quietClose: serving a provider in-process and shutting
// it down logs no ERROR (go-plugin's closed-listener line is demoted), while
// a real error still comes through at ERROR.
func TestServeInProcess_quietClose(t *testing.T) {
	var buf syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace})
	ctx, cancel := context.WithCancel(context.Background())
	p := &fixture{info: sdk.Info{Name: "quiet", Version: "1"}, configure: senderFor(sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) }))}
	attach, closed, err := sdk.ServeInProcess(ctx, p, log)
	if err != nil {
		t.Fatal(err)
	}
	pc, c, err := providerclient.Attach(attach, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Configure(context.Background(), "ch", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	pc.Kill()
	cancel()
	<-closed
	time.Sleep(100 * time.Millisecond) // the server goroutine logs as it returns
	if out := buf.String(); strings.Contains(out, "[ERROR]") {
		t.Errorf("a clean shutdown logged an ERROR:\n%s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// closer counts its Close calls.
type closer struct {
	sdk.Sender
	closed *atomic.Int32
}

func (c closer) Close() error { c.closed.Add(1); return nil }

// A Sender that is an io.Closer is closed when its channel is configured
// again or its new config is rejected — never while it is the channel's.
func TestServe_ConfigureClosesReplacedSender(t *testing.T) {
	t.Parallel()
	var made []*atomic.Int32
	var mu sync.Mutex
	ok := sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) })
	c := serve(t, &fixture{info: sdk.Info{Name: "closer"}, configure: func(ctx context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
		var cfg struct {
			Path string `json:"path"`
		}
		if err := req.Decode(&cfg); err != nil {
			return nil, err
		}
		if cfg.Path == "" {
			return nil, errors.New("config.path is required")
		}
		mu.Lock()
		defer mu.Unlock()
		made = append(made, new(atomic.Int32))
		return closer{ok, made[len(made)-1]}, nil
	}})
	ctx := context.Background()
	counts := func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		var out []int32
		for _, n := range made {
			out = append(out, n.Load())
		}
		return out
	}
	// serve configured "ch" once: made[0].
	if err := c.Configure(ctx, "ch", json.RawMessage(`{"path":"again"}`)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(counts()); got != "[1 0]" {
		t.Fatalf("after a reconfigure: Close calls %s, want [1 0] (the replaced sender closed, the new one not)", got)
	}
	if vs := send(t, c, messages(1, time.Now().Add(time.Minute))); vs[0].Outcome != sdk.OutcomeSuccess {
		t.Fatalf("send through the new sender: %v %q", vs[0].Outcome, vs[0].Detail)
	}
	if err := c.Configure(ctx, "ch", json.RawMessage(`{}`)); err == nil {
		t.Fatal("Configure({}): want the required-path error")
	}
	if got := fmt.Sprint(counts()); got != "[1 1]" {
		t.Fatalf("after a rejected reconfigure: Close calls %s, want [1 1]", got)
	}
}

// A Send or SendBatch still running sdk.StuckAfter past its deadline (code
// that ignores its context) makes the liveness check answer
// ResourceExhausted, naming how many, so the host replaces the process
// instead of letting each retry of the message that causes it hold one
// more core or goroutine; once they return the check is fine again. The
// message itself got its verdict at the deadline.
func TestServer_StuckSendsFailLiveness(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ignores := func() { <-release } // ignores its context on purpose
	single := serve(t, &fixture{info: sdk.Info{Name: "stuck"}, configure: senderFor(sdk.SenderFunc(
		func(ctx context.Context, m sdk.Message) sdk.Verdict {
			if m.ID == 2 {
				ignores()
			}
			return sdk.Success(nil)
		}))})
	never := sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { panic("Send called on a BatchSender") })
	batch := serve(t, &fixture{info: sdk.Info{Name: "stuck-batch"}, configure: senderFor(batcher{never,
		func(ctx context.Context, ms []sdk.Message) []sdk.Verdict { ignores(); return nil }})})
	deadline := time.Now().Add(300 * time.Millisecond)
	vs := send(t, single, messages(3, deadline))
	wantOutcome(t, vs, 1, sdk.OutcomeTransient, sdk.DetailDeadline)
	// Time for SendBatch to be called on a loaded machine: a batch whose
	// deadline has passed before it runs is never sent, so nothing sticks.
	vs = send(t, batch, messages(2, time.Now().Add(2*time.Second)))
	wantOutcome(t, vs, 0, sdk.OutcomeTransient, sdk.DetailDeadline)

	ctx := context.Background()
	if time.Since(deadline) < sdk.StuckAfter/2 { // not stuck yet: a late call is not a stuck one
		if err := single.Alive(ctx); err != nil {
			t.Errorf("liveness %v after the deadline: %v, want nil", time.Since(deadline).Round(time.Millisecond), err)
		}
	}
	for i, c := range []*providerclient.Client{single, batch} {
		var err error
		for end := time.Now().Add(3 * sdk.StuckAfter); err == nil; {
			if time.Now().After(end) {
				t.Fatalf("client %d: liveness still fine %s after its stuck call's deadline, want ResourceExhausted", i, 3*sdk.StuckAfter)
			}
			time.Sleep(100 * time.Millisecond)
			err = c.Alive(ctx)
		}
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "1 sends still running") {
			t.Errorf("liveness with a stuck call: %v, want ResourceExhausted naming 1 send", err)
		}
	}
	close(release)
	for _, c := range []*providerclient.Client{single, batch} {
		for c.Alive(ctx) != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// One message's verdict carries a provider's text with bytes that are not
// UTF-8 (a Latin-1 error page put into Detail or ProviderCode by the
// plugin's own code). Protobuf refused to marshal the call's answer, so the
// call failed, and the host took its delivered messages for an unknown
// outcome and sent them again. Every text goes on the wire as valid UTF-8.
func TestServer_VerdictNotUTF8(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		bad  sdk.Verdict
	}{
		{"detail", sdk.Verdict{Outcome: sdk.OutcomePermanent, Detail: "r\xe9cipient inconnu (caf\xe9)"}},
		{"provider code", sdk.Verdict{Outcome: sdk.OutcomePermanent, Detail: "refused", ProviderCode: "E\xff1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := serve(t, &fixture{info: sdk.Info{Name: "latin1"}, configure: senderFor(sdk.SenderFunc(
				func(ctx context.Context, m sdk.Message) sdk.Verdict {
					if m.ID == 2 {
						return tc.bad
					}
					return sdk.Success(nil)
				}))})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			vs, err := c.Send(ctx, messages(2, time.Now().Add(time.Minute)))
			if err != nil {
				t.Fatalf("Send: the whole call failed (%v): message 1, delivered, is then sent again as outcome unknown", err)
			}
			if vs[0].Outcome != sdk.OutcomeSuccess {
				t.Errorf("verdict 1: got %v %q, want SUCCESS", vs[0].Outcome, vs[0].Detail)
			}
			if vs[1].Outcome != sdk.OutcomePermanent {
				t.Errorf("verdict 2: got %v %q, want PERMANENT", vs[1].Outcome, vs[1].Detail)
			}
		})
	}
}
