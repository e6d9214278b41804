// Package sdktest is the conformance kit for provider plugins: call Run (your
// Provider, in-process) or RunBinary (your built plugin) from a test, and it
// checks over real gRPC that the plugin keeps the notifyd.provider.v1
// contract — Describe, Configure accepting a good config and rejecting bad
// ones with a message that names the key, Send giving exactly one verdict per
// message under deadlines, concurrency and odd payloads, never panicking,
// and Health.
//
//	func TestConformance(t *testing.T) {
//		sdktest.Run(t, &provider{}, sdktest.Features{
//			Config:  json.RawMessage(`{"url":"` + fake.URL + `"}`),
//			Invalid: map[string]json.RawMessage{"missing url": json.RawMessage(`{}`)},
//			Succeed: sdk.Message{Recipient: "user-1", Payload: json.RawMessage(`{"text":"hi"}`)},
//		})
//	}
//
// A BatchSender's test uses FakeBatchAPI, a fake batch provider that answers
// in shuffled order, and sets it as Features.BatchAPI: the suite then fails a
// sender that matches the provider's results to messages by position.
//
// Run with -race: the concurrency checks are meant to surface data races in
// your Sender.
package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// Features tells the suite what to expect of a provider.
type Features struct {
	// Config is a channel config Configure must accept. Required; point it at
	// a fake of your provider (httptest), never a real one.
	Config json.RawMessage
	// Invalid are channel configs Configure must reject, by a name for the
	// subtest ("missing url"). Each rejection needs a message.
	Invalid map[string]json.RawMessage
	// AllowUnknownKeys turns off the check that Config plus an unknown key is
	// rejected with the key named (what sdk.ConfigureRequest.Decode does).
	AllowUnknownKeys bool
	// Succeed is a message Send must deliver (Recipient and Payload are used;
	// the suite fills in IDs, channel, attempt and deadline). Required.
	Succeed sdk.Message
	// Permanent, if set, is a message Send must reject for good (an unknown
	// recipient, a malformed payload), with a Detail.
	Permanent *sdk.Message
	// Transient, if set, is a message Send must answer TRANSIENT (worth
	// retrying: a 5xx or timeout from your fake), with a Detail.
	Transient *sdk.Message
	// RetryAfter, if set, is a message Send must answer TRANSIENT with a
	// RetryAfter of at least RetryAfterMin (your fake answering 429 with a
	// Retry-After header, a quota reset).
	RetryAfter    *sdk.Message
	RetryAfterMin time.Duration
	// BatchAPI, if set, is the FakeBatchAPI that Config points the plugin
	// at (a BatchSender's own fake): the suite then sends a batch in which
	// some recipients carry RejectPrefix, which the fake refuses and answers
	// in shuffled order, and wants exactly those PERMANENT and the others
	// SUCCESS ("Send/batch answered out of order") — what a BatchSender
	// matching answers by position instead of by key gets wrong. Succeed's
	// Recipient, with the prefix put in front, must reach the fake as it is.
	BatchAPI *FakeBatchAPI
	// Batch is how many messages the batch checks send at once; 0 means 32.
	Batch int
	// Timeout bounds each call; 0 means 10 s.
	Timeout time.Duration
}

// Report is what the suite delivered, to check side effects against (a
// file's lines, the requests a fake server saw).
type Report struct {
	Info sdk.Info
	// Sent are the messages that came back SUCCESS.
	Sent []sdk.Message
}

// Channel is the channel name the suite configures.
const Channel = "sdktest"

// Run checks p in-process: it is served exactly as sdk.Serve would serve it,
// over a local socket with go-plugin's test mode, and called through gRPC.
func Run(t *testing.T, p sdk.Provider, f Features) *Report {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	attach, closed, err := sdk.ServeInProcess(ctx, p, logger())
	if err != nil {
		cancel()
		t.Fatalf("sdktest: serve provider in-process: %v", err)
	}
	pc, c, err := providerclient.Attach(attach, logger())
	if err != nil {
		cancel()
		t.Fatalf("sdktest: %v", err)
	}
	t.Cleanup(func() { pc.Kill(); cancel(); <-closed })
	return run(t, c, f)
}

// RunBinary checks a built plugin executable, launched as notifyd launches
// it.
func RunBinary(t *testing.T, path string, f Features) *Report {
	t.Helper()
	cfg := providerclient.Config(logger())
	cfg.Cmd = exec.Command(path)
	cfg.StartTimeout = 30 * time.Second
	pc := plugin.NewClient(cfg)
	t.Cleanup(pc.Kill)
	c, err := providerclient.Dispense(pc)
	if err != nil {
		t.Fatalf("sdktest: start plugin %s: %v", path, err)
	}
	return run(t, c, f)
}

// ConfigureRequest is a ready-made request for calling a provider's
// Configure directly in a unit test: channel Channel, config as given, and a
// Logger that writes to t.Log (never nil).
func ConfigureRequest(t testing.TB, config json.RawMessage) sdk.ConfigureRequest {
	return sdk.ConfigureRequest{
		Channel: Channel,
		Config:  config,
		Logger:  hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: testWriter{t}, Level: hclog.Debug}),
	}
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func logger() hclog.Logger {
	out := io.Discard
	if testing.Verbose() {
		out = os.Stderr
	}
	return hclog.New(&hclog.LoggerOptions{Name: "sdktest", Output: out, Level: hclog.Info})
}

func run(t *testing.T, c *providerclient.Client, f Features) *Report {
	t.Helper()
	if len(f.Config) == 0 {
		t.Fatal("sdktest: Features.Config is required")
	}
	if len(f.Succeed.Payload) == 0 {
		t.Fatal("sdktest: Features.Succeed needs a Payload")
	}
	s := &suite{c: c, f: f, rep: &Report{}}
	for _, ch := range s.checks() {
		t.Run(ch.name, func(t *testing.T) {
			if err := ch.fn(); err != nil {
				t.Error(err)
			}
		})
		if ch.fatal && t.Failed() {
			t.Fatalf("sdktest: %s failed; later checks depend on it", ch.name)
		}
	}
	return s.rep
}

type check struct {
	name  string
	fatal bool // later checks need this one
	fn    func() error
}

// suite holds one run's state; checks run in order.
type suite struct {
	c      *providerclient.Client
	f      Features
	rep    *Report
	nextID int64
}

// NameRE is what a provider's name must look like: it is the <name> in
// notifyd-plugin-<name> and in a channel's `plugin:` key.
var NameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func (s *suite) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout())
}

func (s *suite) timeout() time.Duration {
	if s.f.Timeout > 0 {
		return s.f.Timeout
	}
	return 10 * time.Second
}

func (s *suite) batch() int {
	if s.f.Batch > 0 {
		return s.f.Batch
	}
	return 32
}

// msg makes a fresh message from a template.
func (s *suite) msg(tmpl sdk.Message) sdk.Message {
	s.nextID++
	m := tmpl
	m.ID = s.nextID
	m.Channel = Channel
	m.Attempt = 1
	m.IdempotencyKey = fmt.Sprintf("sdktest-%d", m.ID)
	m.CreatedAt = time.Now()
	m.Deadline = time.Now().Add(s.timeout())
	return m
}

// send sends ms and checks the one-verdict-per-message contract.
func (s *suite) send(ms []sdk.Message) ([]sdk.Verdict, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout()+5*time.Second)
	defer cancel()
	vs, err := s.c.Send(ctx, ms)
	if err != nil {
		return nil, fmt.Errorf("Send: %w", err)
	}
	for i, v := range vs {
		if v.Outcome == sdk.OutcomeTransient && strings.HasPrefix(v.Detail, sdk.DetailPanic) {
			return nil, fmt.Errorf("Send panicked on message %d (payload %s): %s", i, ms[i].Payload, v.Detail)
		}
		if v.Outcome == sdk.OutcomeSuccess && len(v.Result) > 0 && !json.Valid(v.Result) {
			return nil, fmt.Errorf("message %d: Result is not JSON: %q", i, v.Result)
		}
	}
	return vs, nil
}
