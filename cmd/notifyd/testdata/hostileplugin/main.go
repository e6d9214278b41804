// Command hostileplugin is a test plugin (plugins_test.go) whose every text
// holds terminal controls: its name and version, a refused config's reason
// (a channel whose config has "refuse": true) and its health error.
package main

import (
	"context"
	"errors"

	"github.com/notifyd/notifyd/sdk"
)

// controls: OSC 52 writes the clipboard, CSI clears the screen, \r
// overwrites the line, U+009B is CSI.
const controls = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b[2J\rFAKE\u009b2J"

type provider struct{}

func (provider) Describe() sdk.Info {
	return sdk.Info{Name: "hostile" + controls, Version: "1.0" + controls}
}

func (provider) Configure(_ context.Context, req sdk.ConfigureRequest) (sdk.Sender, error) {
	var cfg struct {
		Refuse bool `json:"refuse"`
	}
	if err := req.Decode(&cfg); err != nil {
		return nil, err
	}
	if cfg.Refuse {
		return nil, errors.New("refused" + controls)
	}
	return sender{}, nil
}

type sender struct{}

func (sender) Send(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) }

func (sender) Health(context.Context) error { return errors.New("unwell" + controls) }

func main() { sdk.Serve(provider{}) }
