// Command good is a conforming provider built as a binary, for RunBinary's
// own test.
package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info { return sdk.Info{Name: "good", Version: "1.0.0"} }

func (provider) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		Target string `json:"target"`
	}
	if err := req.Decode(&cfg); err != nil {
		return nil, err
	}
	if cfg.Target == "" {
		return nil, errors.New("config.target is required")
	}
	return sdk.SenderFunc(func(_ context.Context, m sdk.Message) sdk.Verdict {
		if m.Recipient == "nobody" {
			return sdk.Permanent("no such recipient")
		}
		return sdk.Success(json.RawMessage(`{"ok":true}`))
	}), nil
}

func main() { sdk.Serve(provider{}) }
