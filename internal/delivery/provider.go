package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// Provider is what the engine needs of a channel's provider: configure a
// channel, and send a batch with exactly one verdict per message (a failure
// to reach the provider is a TRANSIENT verdict, never an error).
type Provider interface {
	Configure(ctx context.Context, channel string, cfg json.RawMessage) error
	Send(ctx context.Context, ms []sdk.Message) []sdk.Verdict
}

// Providers resolves a channel's `plugin:` name to its provider. The plugin
// host (provider processes from plugins.dir) is one implementation;
// InProcess (providers compiled into this process) is another. The engine
// starts channels side by side: Provider is called concurrently.
type Providers interface {
	Provider(ctx context.Context, name string) (Provider, error)
}

// restarter is what a provider that runs as a process reports.
type restarter interface{ Restarts() int }

// batcher is a provider that says, per configured channel, whether one Send
// is one call of the plugin's Sender however many messages it carries (an
// sdk.BatchSender): such a channel's concurrency counts calls (fetch.go).
// Both the plugin host and InProcess are.
type batcher interface{ Batches(channel string) bool }

// hostProviders is the plugin host as Providers.
type hostProviders struct{ h *pluginhost.Host }

func (p hostProviders) Provider(ctx context.Context, name string) (Provider, error) {
	pl, err := p.h.Plugin(ctx, name)
	if err != nil {
		return nil, err
	}
	return pl, nil
}

// InProcess serves providers written in Go inside this process, by name, for
// an application that embeds notifyd and for tests that need no plugin
// binary. Each runs behind the same gRPC protocol and SDK dispatch a plugin
// binary does (sdk.ServeInProcess), so verdicts are checked, sends are
// bounded by Info.MaxConcurrency and a panic is a TRANSIENT verdict, as in a
// plugin. Close stops them.
type InProcess struct {
	providers map[string]sdk.Provider
	log       hclog.Logger

	mu      sync.Mutex
	running map[string]*inProcess
	ctx     context.Context
	stop    context.CancelFunc
}

// NewInProcess serves providers (name → provider); log may be nil.
func NewInProcess(providers map[string]sdk.Provider, log hclog.Logger) *InProcess {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	ctx, stop := context.WithCancel(context.Background())
	return &InProcess{providers: providers, log: log, running: map[string]*inProcess{}, ctx: ctx, stop: stop}
}

type inProcess struct {
	pc     *plugin.Client
	c      *providerclient.Client
	closed <-chan struct{}

	mu      sync.Mutex
	batches map[string]bool
}

// Provider starts the named provider on first use.
func (p *InProcess) Provider(ctx context.Context, name string) (Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.running[name]; ok {
		return r, nil
	}
	prov, ok := p.providers[name]
	if !ok {
		return nil, fmt.Errorf("in-process provider %q: %w", name, pluginhost.ErrNotFound)
	}
	if p.ctx.Err() != nil {
		return nil, fmt.Errorf("in-process provider %q: %w", name, pluginhost.ErrClosed)
	}
	attach, closed, err := sdk.ServeInProcess(p.ctx, prov, p.log.Named(name))
	if err != nil {
		return nil, fmt.Errorf("in-process provider %q: %w", name, err)
	}
	pc, c, err := providerclient.Attach(attach, p.log.Named(name))
	if err != nil {
		return nil, fmt.Errorf("in-process provider %q: %w", name, err)
	}
	r := &inProcess{pc: pc, c: c, closed: closed, batches: map[string]bool{}}
	p.running[name] = r
	return r, nil
}

// Close stops every provider it started.
func (p *InProcess) Close() {
	p.mu.Lock()
	running := p.running
	p.running = map[string]*inProcess{}
	p.mu.Unlock()
	for _, r := range running {
		r.pc.Kill()
	}
	p.stop()
	for _, r := range running {
		<-r.closed
	}
}

func (r *inProcess) Configure(ctx context.Context, channel string, cfg json.RawMessage) error {
	got, err := r.c.ConfigureChannel(ctx, channel, cfg)
	r.mu.Lock()
	r.batches[channel] = got.Batches
	r.mu.Unlock()
	return err
}

func (r *inProcess) Batches(channel string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batches[channel]
}

func (r *inProcess) Send(ctx context.Context, ms []sdk.Message) []sdk.Verdict {
	vs, err := r.c.Send(ctx, ms)
	if err == nil {
		return vs
	}
	detail := pluginhost.DetailCallFailed
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		detail = pluginhost.DetailNoAnswer
	}
	out := make([]sdk.Verdict, len(ms))
	for i := range out {
		out[i] = sdk.Transient(fmt.Sprintf("%s: %v", detail, err))
	}
	return out
}

func (r *inProcess) Callback(ctx context.Context, req sdk.CallbackRequest) (sdk.CallbackAnswer, error) {
	return r.c.Callback(ctx, req)
}

// CallbackProvider is a Provider that can hand a provider's callback to its
// plugin: the plugin host's and InProcess's both are. Whether the plugin
// itself takes callbacks is its own answer (providerclient.ErrCallbackUnsupported).
type CallbackProvider interface {
	Callback(ctx context.Context, req sdk.CallbackRequest) (sdk.CallbackAnswer, error)
}

// ErrCallbackUnsupported: the channel's plugin takes no callbacks.
var ErrCallbackUnsupported = providerclient.ErrCallbackUnsupported

// ErrChannelStopped: the channel is configured but not running here (its
// plugin failed to start or refused its config).
var ErrChannelStopped = errors.New("delivery: channel not running")

// Callback hands a provider's callback to channel's plugin and returns the
// updates it read (docs/design.md §7, Receipts). It records nothing: the
// caller applies the updates to the outbox.
func (e *Engine) Callback(ctx context.Context, channel string, req sdk.CallbackRequest) (sdk.CallbackAnswer, error) {
	ch, ok := e.channels[channel]
	if !ok {
		return sdk.CallbackAnswer{}, fmt.Errorf("%w %q", ErrUnknownChannel, channel)
	}
	ch.mu.Lock()
	p, running, why := ch.plugin, ch.ok, ch.err
	ch.mu.Unlock()
	if !running || p == nil {
		return sdk.CallbackAnswer{}, fmt.Errorf("%w: channel %s: %s", ErrChannelStopped, channel, cmp.Or(why, "not started"))
	}
	cp, ok := p.(CallbackProvider)
	if !ok {
		return sdk.CallbackAnswer{}, fmt.Errorf("channel %s: %w", channel, ErrCallbackUnsupported)
	}
	req.Channel = channel
	return cp.Callback(ctx, req)
}
