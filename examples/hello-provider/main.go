// Command hello-provider is a whole notifyd provider plugin for a plain HTTP API: one JSON
// POST per message, 4xx final, 5xx and 429 retried. Install it as notifyd-plugin-hello.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info {
	return sdk.Info{Name: "hello", Version: "1.0.0", ConfigSchema: json.RawMessage(
		`{"type":"object","required":["url"],"properties":{"url":{"type":"string"},"token":{"type":"string"}}}`)}
}

func (provider) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		URL   string `json:"url"`   // where to POST each message
		Token string `json:"token"` // sent as a bearer token, if set
	}
	if err := req.Decode(&cfg); err != nil { // an unknown key or a wrong type, named
		return nil, err
	}
	if _, err := sdk.ParseHTTPURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("config.url %v", err)
	}
	if err := sdk.CheckHeaderValue(cfg.Token); err != nil {
		return nil, fmt.Errorf("config.token %v", err)
	}
	header := http.Header{}
	if cfg.Token != "" {
		header.Set("Authorization", "Bearer "+cfg.Token) // redacted wherever the API echoes it
	}
	return &sdk.HTTPSender{Build: func(ctx context.Context, m sdk.Message) (*http.Request, error) {
		body := map[string]any{"id": m.ID, "recipient": m.Recipient, "attempt": m.Attempt, "payload": m.Payload}
		return sdk.PostJSON(ctx, cfg.URL, body, header)
	}}, nil
}

func main() { sdk.Serve(provider{}) }
