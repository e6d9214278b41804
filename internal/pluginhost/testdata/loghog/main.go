// Command loghog is a hostile test plugin: a working provider whose process
// writes log lines to its stderr as fast as it can from the moment it
// starts — hclog's JSON lines at error level (the host parses and logs
// each), with a plain-text line of 100 KB now and then — while its sends
// succeed.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info { return sdk.Info{Name: "loghog", Version: "1.0.0"} }

func (provider) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(func(context.Context, sdk.Message) sdk.Verdict { return sdk.Success(nil) }), nil
}

func main() {
	out := os.Stderr // the process's own stderr: sdk.Serve points os.Stderr elsewhere
	if strings.Contains(filepath.Base(os.Args[0]), "stdio") {
		out = nil // os.Stderr as it is when each line is written: go-plugin's stdio stream
	}
	go func() {
		w := func() *os.File {
			if out != nil {
				return out
			}
			return os.Stderr
		}
		long := strings.Repeat("x", 100_000) + "\n"
		for i := 0; ; i++ {
			if i%1000 == 999 {
				_, _ = w().WriteString(long)
				continue
			}
			_, _ = fmt.Fprintf(w(), `{"@level":"error","@message":"flood %d","@timestamp":"%s","n":%d}`+"\n",
				i, time.Now().Format(time.RFC3339Nano), i)
		}
	}()
	sdk.Serve(provider{})
}
