// Package providers adapts provider sources to the delivery engine's
// Providers interface: the plugin host (provider processes from plugins.dir)
// and InProcess (providers written in Go, served inside this process behind
// the same protocol). The engine knows only its Provider interface; this
// package is where it meets the plugin host (docs/design.md §1).
package providers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/pluginhost"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// Host is the plugin host as the engine's Providers: a channel's `plugin:`
// name is a plugin executable in plugins.dir, launched on first use.
func Host(h *pluginhost.Host) delivery.Providers { return hostProviders{h} }

type hostProviders struct{ h *pluginhost.Host }

func (p hostProviders) Provider(ctx context.Context, name string) (delivery.Provider, error) {
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
func (p *InProcess) Provider(ctx context.Context, name string) (delivery.Provider, error) {
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
	out := make([]sdk.Verdict, len(ms))
	for i := range out {
		out[i] = callFailed(ctx, err)
	}
	return out
}

// SendEach is Send with each verdict given to got as the provider answers
// it (the protocol's SendStream), as a plugin binary's are: a message its
// provider holds until the deadline holds none of its batch-mates' verdicts
// nor their send permits. Messages the call leaves unanswered get the
// verdict Send gives a failed call.
func (r *inProcess) SendEach(ctx context.Context, ms []sdk.Message, got func(idx []int, vs []sdk.Verdict)) {
	answered := make([]bool, len(ms))
	err := r.c.SendEach(ctx, ms, func(idx []int, vs []sdk.Verdict) {
		for _, i := range idx {
			answered[i] = true
		}
		got(idx, vs)
	})
	var idx []int
	var vs []sdk.Verdict
	for i, done := range answered {
		if !done {
			idx, vs = append(idx, i), append(vs, callFailed(ctx, cmp.Or(err, errors.New("no verdict"))))
		}
	}
	if len(idx) > 0 {
		got(idx, vs)
	}
}

// callFailed is the verdict of a message whose call failed with err: its
// outcome unknown, so TRANSIENT, saying whether the deadline passed.
func callFailed(ctx context.Context, err error) sdk.Verdict {
	detail := pluginhost.DetailCallFailed
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		detail = pluginhost.DetailNoAnswer
	}
	return sdk.Transient(fmt.Sprintf("%s: %v", detail, err))
}

func (r *inProcess) Callback(ctx context.Context, req sdk.CallbackRequest) (sdk.CallbackAnswer, error) {
	return r.c.Callback(ctx, req)
}
