package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
// host (provider processes from plugins.dir) is one implementation,
// providers.InProcess (providers compiled into this process) another; both
// live outside the engine (internal/providers). The engine
// starts channels side by side: Provider is called concurrently.
type Providers interface {
	Provider(ctx context.Context, name string) (Provider, error)
}

// restarter is what a provider that runs as a process reports.
type restarter interface{ Restarts() int }

// batcher is a provider that says, per configured channel, whether one Send
// is one call of the plugin's Sender however many messages it carries (an
// sdk.BatchSender): such a channel's concurrency counts calls (fetch.go).
// Both the plugin host and providers.InProcess are.
type batcher interface{ Batches(channel string) bool }

// streamer is a provider that hands a call's verdicts over as its plugin
// answers them (the plugin host's SendEach: protocol SendStream), each
// message's exactly once, on the caller's goroutine: a message its provider
// holds until its deadline then holds neither its batch-mates' verdicts
// nor their send permits (send.go).
type streamer interface {
	SendEach(ctx context.Context, ms []sdk.Message, got func(idx []int, vs []sdk.Verdict))
}

// CallbackProvider is a Provider that can hand a provider's callback to its
// plugin: the plugin host's and providers.InProcess's both are. Whether the plugin
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
