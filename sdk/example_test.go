package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/providerclient"
)

// sms is a provider for an imaginary SMS vendor: the whole of what a plugin
// author writes is Describe, Configure and a Sender.
type sms struct{}

func (sms) Describe() sdk.Info {
	return sdk.Info{Name: "sms", Version: "1.0.0"}
}

func (sms) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		From string `json:"from"`
	}
	if err := req.Decode(&cfg); err != nil { // unknown keys and wrong types are errors
		return nil, err
	}
	if cfg.From == "" {
		return nil, fmt.Errorf("config.from is required: the sender number")
	}
	return sdk.SenderFunc(func(ctx context.Context, m sdk.Message) sdk.Verdict {
		if !strings.HasPrefix(m.Recipient, "+") {
			return sdk.Permanent("recipient is not an E.164 number") // retrying cannot fix it
		}
		// A real provider calls its vendor here and lets ClassifyHTTP turn
		// the answer into a verdict: 2xx success, 429/5xx/timeouts retried,
		// other 4xx final.
		return sdk.ClassifyHTTP(&http.Response{StatusCode: 202, Header: http.Header{}, Body: http.NoBody}, nil)
	}), nil
}

// A plugin's main is one line; notifyd starts the binary and talks to it
// over gRPC.
func ExampleServe() {
	sdk.Serve(sms{})
}

// ServeInProcess runs the same provider inside this process, as notifyd
// would reach it: configure a channel, send a batch, read the verdicts.
func ExampleServeInProcess() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attach, closed, err := sdk.ServeInProcess(ctx, sms{}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	pc, c, err := providerclient.Attach(attach, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { pc.Kill(); cancel(); <-closed }()

	if err := c.Configure(ctx, "sms", json.RawMessage(`{}`)); err != nil {
		fmt.Println("configure:", err)
	}
	if err := c.Configure(ctx, "sms", json.RawMessage(`{"from":"+821000000000"}`)); err != nil {
		fmt.Println(err)
		return
	}
	verdicts, err := c.Send(ctx, []sdk.Message{
		{ID: 1, Channel: "sms", Recipient: "+821012345678", Payload: json.RawMessage(`{"text":"hi"}`)},
		{ID: 2, Channel: "sms", Recipient: "ada", Payload: json.RawMessage(`{"text":"hi"}`)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, v := range verdicts {
		fmt.Println(strings.TrimSpace(fmt.Sprint(i+1, " ", v.Outcome, " ", v.Detail)))
	}
	// Output:
	// configure: channel sms: config rejected: config.from is required: the sender number
	// 1 SUCCESS
	// 2 PERMANENT recipient is not an E.164 number
}
