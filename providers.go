package notifyd

import (
	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/internal/delivery"
	"github.com/notifyd/notifyd/internal/providers"
	"github.com/notifyd/notifyd/sdk"
)

// Provider is what the delivery engine needs of a channel's provider:
// configure a channel, and send a batch with exactly one verdict per message
// (a failure to reach the provider is a TRANSIENT verdict, never an error).
type Provider = delivery.Provider

// Providers resolves a channel's `plugin:` name to its Provider
// (Options.Providers). The plugin host over plugins.dir is the default;
// NewInProcess serves providers written in Go.
type Providers = delivery.Providers

// InProcess serves providers written in Go inside the application's process,
// behind the same gRPC protocol and SDK dispatch a plugin binary uses, so
// verdicts are checked, sends are bounded and a panic is a TRANSIENT verdict
// as in a plugin. Close stops them (after Daemon.Stop).
type InProcess = providers.InProcess

// NewInProcess serves providers (a channel's `plugin:` name → the provider)
// for Options.Providers; log may be nil.
func NewInProcess(ps map[string]sdk.Provider, log hclog.Logger) *InProcess {
	return providers.NewInProcess(ps, log)
}

// Hooks are called between the delivery pipeline's steps with each batch's
// channel and ids (Options.Hooks); nil functions are skipped. One that
// returns an error abandons the batch at that point as if the process had
// died there — the fault suite opens each crash window so — and the
// benchmark times the stages with them. An application needs none.
type Hooks = delivery.Hooks
