// Command wrongcookie is a go-plugin binary with another application's
// handshake cookie: the host must refuse it with a clear error.
package main

import "github.com/hashicorp/go-plugin"

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion:  1,
			MagicCookieKey:   "SOME_OTHER_APP_PLUGIN",
			MagicCookieValue: "not-notifyd",
		},
		Plugins: plugin.PluginSet{},
	})
}
