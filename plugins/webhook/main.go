// Command notifyd-plugin-webhook is the notifyd provider plugin that POSTs each
// notification as a JSON envelope to an HTTP endpoint, signed the Standard
// Webhooks way (webhook-id, webhook-timestamp, webhook-signature). It is the
// test double for any real provider and the sink of the throughput benchmark,
// so its send path is kept lean: one shared fasthttp client (net/http only for
// targets behind a proxy), one body allocation.
//
// See README.md for the config keys and how each response is classified.
package main

import "github.com/notifyd/notifyd/sdk"

func main() { sdk.Serve(&provider{}) }
