// Command junk is a test plugin that breaks the rule every plugin must keep:
// it prints to stdout before the handshake.
package main

import (
	"context"
	"fmt"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info { return sdk.Info{Name: "junk", Version: "0"} }

func (provider) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) }), nil
}

func main() {
	fmt.Println("hello from a chatty plugin")
	sdk.Serve(provider{})
}
