// Command notifyd-plugin-voyage is the notifyd provider plugin for Voyage AI
// embeddings: each notification is one POST /v1/embeddings request, the
// embeddings and usage become the notification's result, and, when the
// channel has a callback_url, they are POSTed there too.
//
// See README.md for the config keys, the payload shape and how each error is
// classified.
package main

import "github.com/notifyd/notifyd/sdk"

func main() { sdk.Serve(&provider{}) }
