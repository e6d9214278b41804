// Package providerv1 is protocol notifyd.provider.v1: the generated gRPC code
// and the go-plugin handshake both sides share. Plugin authors never import
// it; sdk.Serve and the host do.
package providerv1

import "github.com/hashicorp/go-plugin"

// Version is the go-plugin protocol version this package speaks. A future v2
// sits beside it in VersionedPlugins so old plugins keep working.
const Version = 1

// PluginName is the key the provider service is dispensed under.
const PluginName = "provider"

// Handshake keeps a notifyd plugin from being run by hand or by another
// go-plugin host: both sides must agree on the cookie.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  Version,
		MagicCookieKey:   "NOTIFYD_PLUGIN",
		MagicCookieValue: "notifyd.provider.v1:6f1c2d0e9b7a",
	}
}

// EnvLogLevel is how the host tells a plugin which log level it forwards
// (trace, debug, info, warn, error); the plugin defaults to info.
const EnvLogLevel = "NOTIFYD_PLUGIN_LOG_LEVEL"

// MaxMessageBytes bounds one gRPC message both ways: a batch of 256
// notifications with large payloads, or embeddings coming back, exceeds
// gRPC's 4 MB default.
const MaxMessageBytes = 64 << 20
