// Command cpuhog is a hostile test plugin: a working provider whose messages
// can make it spin. A payload {"spin": N} starts N goroutines that spin for
// the life of the process, on N more Ps; {"child": N} starts a process of
// its own (a helper, a worker, in its process group) that spins N threads,
// and answers its pid as the result. Each then succeeds; anything else
// succeeds at once.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"

	"github.com/notifyd/notifyd/sdk"
)

type provider struct{}

func (provider) Describe() sdk.Info { return sdk.Info{Name: "cpuhog", Version: "1.0.0"} }

func (provider) Configure(context.Context, sdk.ConfigureRequest) (sdk.Sender, error) {
	return sdk.SenderFunc(send), nil
}

var mu sync.Mutex

func spin(n int) {
	mu.Lock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + n)
	mu.Unlock()
	for range n {
		go func() {
			for x := 0; ; x++ {
				_ = x
			}
		}()
	}
}

func send(_ context.Context, m sdk.Message) sdk.Verdict {
	var p struct {
		Spin  int `json:"spin"`
		Child int `json:"child"`
	}
	_ = json.Unmarshal(m.Payload, &p)
	switch {
	case p.Spin > 0:
		spin(p.Spin)
	case p.Child > 0:
		exe, err := os.Executable()
		if err != nil {
			return sdk.Permanent(err.Error())
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "CPUHOG_CHILD="+strconv.Itoa(p.Child))
		if err := cmd.Start(); err != nil {
			return sdk.Permanent(err.Error())
		}
		return sdk.Success(json.RawMessage(fmt.Sprintf(`{"child_pid":%d}`, cmd.Process.Pid)))
	}
	return sdk.Success(nil)
}

func main() {
	if n, err := strconv.Atoi(os.Getenv("CPUHOG_CHILD")); err == nil && n > 0 {
		spin(n)
		select {}
	}
	sdk.Serve(provider{})
}
