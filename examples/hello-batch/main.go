// Command hello-batch is a whole notifyd provider plugin for an HTTP API that takes up to
// 100 messages per request and answers per message, by key, in any order (the format of
// sdktest.FakeBatchAPI). Install it as notifyd-plugin-hello-batch.
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
	return sdk.Info{Name: "hello-batch", Version: "1.0.0", ConfigSchema: json.RawMessage(
		`{"type":"object","required":["url"],"properties":{"url":{"type":"string"}}}`)}
}

func (provider) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		URL string `json:"url"` // where to POST each batch
	}
	if err := req.Decode(&cfg); err != nil {
		return nil, err
	}
	if _, err := sdk.ParseHTTPURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("config.url %v", err)
	}
	return &sdk.HTTPBatchSender{MaxPerRequest: 100, Parse: parse,
		Build: func(ctx context.Context, ms []sdk.Message) (*http.Request, error) {
			items := make([]map[string]any, len(ms))
			for i, m := range ms { // each with its key, echoed in its result
				items[i] = map[string]any{"key": m.Key(), "recipient": m.Recipient, "payload": m.Payload}
			}
			return sdk.PostJSON(ctx, cfg.URL, map[string]any{"messages": items}, nil)
		}}, nil
}

// parse reads the answer into verdicts by key: never by position.
func parse(_ *http.Response, body []byte, _ []sdk.Message) (map[string]sdk.Verdict, error) {
	var answer struct {
		Results []struct {
			Key, Status, Error string
			MessageID          string `json:"message_id"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, err
	}
	vs := make(map[string]sdk.Verdict, len(answer.Results))
	for _, r := range answer.Results {
		switch r.Status {
		case "accepted":
			vs[r.Key] = sdk.Success(json.RawMessage(fmt.Sprintf("%q", r.MessageID)))
		case "rejected":
			vs[r.Key] = sdk.Permanent(r.Error)
		default: // throttled
			vs[r.Key] = sdk.Transient(r.Status + ": " + r.Error)
		}
	}
	return vs, nil
}

func main() { sdk.Serve(provider{}) }
