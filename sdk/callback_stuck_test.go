package sdk_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/notifyd/notifyd/sdk"
)

// hangsCallback is a Sender whose callback handler ignores its context (a
// call made without it) and, for a body of "hang", does not return until
// block is closed.
type hangsCallback struct {
	sdk.SenderFunc
	block chan struct{}
}

func (h hangsCallback) HandleCallback(_ context.Context, req sdk.CallbackRequest) (sdk.CallbackAnswer, error) {
	if string(req.Body) == "hang" {
		<-h.block
	}
	return sdk.CallbackAnswer{Updates: []sdk.ReceiptUpdate{sdk.DeliveredUpdate(1, "")}}, nil
}

// A callback handler that ignores its context: each callback the host
// relayed (every webhook a provider made, and each of its retries) held
// the plugin's gRPC call goroutine, with the request and its body, for the
// life of the process. A channel runs at most sdk.MaxCallbacksRunning
// handlers now, those past their deadline included; past them a callback
// is refused with ResourceExhausted (the host answers the provider 503 and
// Retry-After), and the channel takes callbacks again once they return.
//
// Not parallel: it counts the process's goroutines.
func TestCallback_HungHandlerBounded(t *testing.T) {
	block := make(chan struct{})
	unblocked := false
	defer func() {
		if !unblocked {
			close(block)
		}
	}()
	c := serve(t, &fixture{info: sdk.Info{Name: "hung"}, configure: senderFor(hangsCallback{SenderFunc: noSend, block: block})})
	before := runtime.NumGoroutine()
	const callbacks = 200
	refused := 0
	for range callbacks {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := c.Callback(ctx, sdk.CallbackRequest{Channel: "ch", Body: []byte("hang")})
		cancel()
		if err == nil {
			t.Fatalf("a callback whose handler never returns was answered")
		}
		if status.Code(errors.Unwrap(err)) == codes.ResourceExhausted || status.Code(err) == codes.ResourceExhausted {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("%d callbacks against a handler that never returns: none refused as ResourceExhausted", callbacks)
	}
	// Goroutines of gRPC's own come and go: wait for them to settle.
	bound := sdk.MaxCallbacksRunning + callbacks/10
	var leaked int
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if leaked = runtime.NumGoroutine() - before; leaked <= bound {
			break
		}
	}
	if leaked > bound {
		t.Errorf("%d callbacks against a handler that never returns left %d more goroutines, want at most %d", callbacks, leaked, bound)
	}

	// Once the stuck handlers return, the channel takes callbacks again.
	close(block)
	unblocked = true
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var ans sdk.CallbackAnswer
		ans, err = c.Callback(ctx, sdk.CallbackRequest{Channel: "ch", Body: []byte("ok")})
		cancel()
		if err == nil {
			if len(ans.Updates) != 1 {
				t.Errorf("answer %+v, want one update", ans)
			}
			return
		}
	}
	t.Errorf("after the stuck handlers returned, a callback still fails: %v", err)
}
