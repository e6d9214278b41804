package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// fixture is a provider whose faults the test switches on.
type fixture struct {
	name, version string
	lenient       bool // ignores unknown keys
	acceptAll     bool // never rejects a config
	panicOnNull   bool
	alwaysRetry   bool
	permanentMiss bool // never PERMANENT
	transientMiss bool // a provider's 5xx as PERMANENT
	noRetryAfter  bool // a 429 without its Retry-After
	batchLikeHead bool // a BatchSender that gives every message the first one's verdict
	rejectPrefix  bool // refuses RejectPrefix recipients itself, never asking a provider

	mu   sync.Mutex
	seen map[int64]bool
}

func (f *fixture) Describe() sdk.Info {
	return sdk.Info{Name: f.name, Version: f.version, MaxConcurrency: 8}
}

func (f *fixture) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		Target string `json:"target"`
	}
	var err error
	if f.lenient {
		err = json.Unmarshal(req.Config, &cfg)
	} else {
		err = req.Decode(&cfg)
	}
	if f.acceptAll {
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	if cfg.Target == "" {
		return nil, errors.New("config.target is required")
	}
	if f.batchLikeHead {
		return headBatch{f}, nil
	}
	return f, nil
}

// headBatch is the classic batching bug: one request's verdict taken as
// every recipient's.
type headBatch struct{ *fixture }

func (h headBatch) SendBatch(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
	v := h.Send(ctx, ms[0])
	vs := make([]sdk.Verdict, len(ms))
	for i := range vs {
		vs[i] = v
	}
	return vs
}

func (f *fixture) Send(_ context.Context, m sdk.Message) sdk.Verdict {
	if f.panicOnNull && string(m.Payload) == "null" {
		var p *struct{ X int }
		_ = p.X // nil dereference, as a careless decoder would
	}
	if f.alwaysRetry {
		return sdk.Transient("try later")
	}
	if f.rejectPrefix && strings.HasPrefix(m.Recipient, RejectPrefix) {
		return sdk.Permanent("refused here")
	}
	if m.Recipient == "nobody" && !f.permanentMiss {
		return sdk.Permanent("no such recipient")
	}
	if m.Recipient == "flaky" {
		if f.transientMiss {
			return sdk.Permanent("HTTP 503")
		}
		return sdk.Transient("HTTP 503")
	}
	if m.Recipient == "throttled" {
		if f.noRetryAfter {
			return sdk.Transient("HTTP 429")
		}
		return sdk.Transient("HTTP 429").WithRetryAfter(30 * time.Second)
	}
	f.mu.Lock()
	f.seen[m.ID] = true
	f.mu.Unlock()
	return sdk.Success(json.RawMessage(`{"ok":true}`))
}

func features() Features {
	return Features{
		Config:        json.RawMessage(`{"target":"x"}`),
		Invalid:       map[string]json.RawMessage{"missing target": json.RawMessage(`{}`)},
		Succeed:       sdk.Message{Recipient: "user-1", Payload: json.RawMessage(`{"text":"hi"}`)},
		Permanent:     &sdk.Message{Recipient: "nobody", Payload: json.RawMessage(`{"text":"hi"}`)},
		Transient:     &sdk.Message{Recipient: "flaky", Payload: json.RawMessage(`{"text":"hi"}`)},
		RetryAfter:    &sdk.Message{Recipient: "throttled", Payload: json.RawMessage(`{"text":"hi"}`)},
		RetryAfterMin: 30 * time.Second,
		Batch:         8,
	}
}

func TestRun_Good(t *testing.T) {
	t.Parallel()
	f := &fixture{name: "good", version: "1.0.0", seen: map[int64]bool{}}
	rep := Run(t, f, features())
	if rep.Info.Name != "good" {
		t.Errorf("Report.Info.Name: got %q, want good", rep.Info.Name)
	}
	// 1 + the 3 successes of the mixed batch of 9 + one batch of 8 + four
	// concurrent batches of 8.
	if got, want := len(rep.Sent), 1+3+8+4*8; got != want {
		t.Errorf("Report.Sent: got %d messages, want %d", got, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range rep.Sent {
		if !f.seen[m.ID] {
			t.Errorf("Report.Sent has message %d the provider never saw", m.ID)
		}
	}
}

// failing runs every check against p in-process and returns the names of
// those that failed.
func failing(t *testing.T, p sdk.Provider, f Features) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	attach, closed, err := sdk.ServeInProcess(ctx, p, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pc, c, err := providerclient.Attach(attach, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer func() { pc.Kill(); cancel(); <-closed }()
	s := &suite{c: c, f: f, rep: &Report{}}
	var failed []string
	for _, ch := range s.checks() {
		if err := ch.fn(); err != nil {
			t.Logf("%s: %v", ch.name, err)
			failed = append(failed, ch.name)
		}
	}
	sort.Strings(failed)
	return failed
}

func TestSuite_CatchesFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    *fixture
		want string // failing checks, comma-separated, sorted
	}{
		{"conforming", &fixture{}, ""},
		{"bad name and no version", &fixture{name: "Bad Name", version: "-"}, "Describe"},
		{"ignores unknown keys", &fixture{lenient: true}, "Configure/unknown key"},
		{"accepts any config", &fixture{acceptAll: true}, "Configure/invalid/missing target,Configure/unknown key"},
		{"panics on a null payload", &fixture{panicOnNull: true}, "Send/odd payloads"},
		{"never delivers", &fixture{alwaysRetry: true}, "Send/batch,Send/concurrent batches,Send/mixed batch,Send/permanent,Send/success,Send/transient with Retry-After"},
		{"never permanent", &fixture{permanentMiss: true}, "Send/mixed batch,Send/permanent"},
		{"a 5xx as permanent", &fixture{transientMiss: true}, "Send/mixed batch,Send/transient"},
		{"one verdict for a whole batch", &fixture{batchLikeHead: true}, "Send/mixed batch"},
		{"a 429 without its Retry-After", &fixture{noRetryAfter: true}, "Send/transient with Retry-After"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.p.name == "" {
				tt.p.name = "fixture"
			}
			if tt.p.version == "" {
				tt.p.version = "1.0.0"
			} else if tt.p.version == "-" {
				tt.p.version = ""
			}
			tt.p.seen = map[int64]bool{}
			if got := strings.Join(failing(t, tt.p, features()), ","); got != tt.want {
				t.Errorf("failing checks: got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestConfigureRequest: the ready-made request configures a provider called
// directly, and its Logger is never nil; sdk.ConfigureRequest.Log is safe on
// a request built by hand.
func TestConfigureRequest(t *testing.T) {
	t.Parallel()
	req := ConfigureRequest(t, json.RawMessage(`{"target":"x"}`))
	if req.Logger == nil || req.Channel != Channel {
		t.Fatalf("ConfigureRequest = %+v, want channel %q and a Logger", req, Channel)
	}
	f := &fixture{name: "direct", version: "1", seen: map[int64]bool{}}
	if _, err := f.Configure(context.Background(), req); err != nil {
		t.Errorf("Configure(ready-made request): %v", err)
	}
	req.Log().Info("logged through the ready-made request")
	sdk.ConfigureRequest{}.Log().Info("a nil Logger discards, never panics")
}
