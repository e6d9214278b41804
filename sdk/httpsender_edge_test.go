package sdk_test

// Tests of what HTTPSender and HTTPBatchSender do with a provider's
// connection-level behaviour: connections dropped after a request, and
// answers no well-behaved server writes.

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// warm sends n messages at once, so the client is left with up to n idle
// connections, and then makes the provider drop every later request.
func warmUp(t *testing.T, s *sdktest.DroppingReceiver, n int, send func(sdk.Message) sdk.Verdict) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v := send(sdk.Message{ID: int64(100 + i), Payload: json.RawMessage(`{}`)}); v.Outcome != sdk.OutcomeSuccess {
				t.Errorf("warm-up send %d: %v (%s)", i, v.Outcome, v.Detail)
			}
		}()
	}
	wg.Wait()
	s.Drop()
}

// TestHTTPSender_droppedAfterTheRequest: a provider that reads a request and
// closes the connection without answering may have acted on it. net/http
// replays a request that carries an Idempotency-Key (HTTPSender adds one)
// when a reused connection fails before the answer's first byte — on every
// idle connection in turn, then on a new one: one Send delivered the message
// three times with the default client (http.DefaultTransport's settings) and
// nine times with a client keeping eight idle connections (up to
// MaxIdleConnsPerHost + 1). A stale keep-alive connection needs one replay;
// the rest is the engine's retry, later, under the same key.
func TestHTTPSender_droppedAfterTheRequest(t *testing.T) {
	t.Parallel()
	const warm = 8
	own := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(own.CloseIdleConnections)
	for name, client := range map[string]*http.Client{
		"the default client":                          nil,
		"a client keeping 64 idle connections a host": {Transport: own},
	} {
		for _, batch := range []bool{false, true} {
			name := name + map[bool]string{false: ", HTTPSender", true: ", HTTPBatchSender"}[batch]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				p := sdktest.NewDroppingReceiver(t, "/send", warm)
				var sender sdk.Sender = &sdk.HTTPSender{Client: client, Build: postTo(p.URL)}
				if batch {
					sender = &sdk.HTTPBatchSender{Client: client,
						Build: func(ctx context.Context, ms []sdk.Message) (*http.Request, error) {
							// A batch API that takes a key per request, as
							// a provider honouring one does.
							return sdk.PostJSON(ctx, p.URL, ms[0].Payload, http.Header{"Idempotency-Key": {"batch-" + ms[0].Key()}})
						},
						Parse: func(_ *http.Response, _ []byte, ms []sdk.Message) (map[string]sdk.Verdict, error) {
							return map[string]sdk.Verdict{ms[0].Key(): sdk.Success(nil)}, nil
						}}
				}
				send := func(m sdk.Message) sdk.Verdict { return sender.Send(context.Background(), m) }
				warmUp(t, p, warm, send)
				v := send(sdk.Message{ID: 1, Payload: json.RawMessage(`{}`)})
				if v.Outcome != sdk.OutcomeTransient {
					t.Errorf("verdict %v (%s); want TRANSIENT", v.Outcome, v.Detail)
				}
				// Every request was counted before its connection closed,
				// which was before the send returned.
				if got := p.Dropped(); got < 1 || got > 2 {
					t.Errorf("the provider got the message %d times in one send (%s); want 1 or 2", got, v.Detail)
				}
				if !strings.Contains(v.Detail, "request failed") {
					t.Errorf("detail %q; want it to say the request failed", v.Detail)
				}
			})
		}
	}
}

// TestHTTPSender_hugeAnswerHeaders: the helpers' default client read an
// answer's status line and headers up to net/http's default of 10 MiB, and
// allocated several times that (about 67 MB for a 9 MiB header), per
// request in flight. It reads at most MaxHTTPAnswerHeader; a longer head is
// TRANSIENT, as any answer that cannot be read, naming the bound.
func TestHTTPSender_hugeAnswerHeaders(t *testing.T) {
	t.Parallel()
	for _, size := range []int{32 << 10, 1 << 20} {
		url := sdktest.RawServer(t, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("h", size)+"\r\nContent-Length: 0\r\n\r\n")
		s := &sdk.HTTPSender{Build: postTo(url)}
		v := s.Send(context.Background(), sdk.Message{ID: 1, Payload: json.RawMessage(`{}`)})
		switch {
		case size < sdk.MaxHTTPAnswerHeader && v.Outcome != sdk.OutcomeSuccess:
			t.Errorf("a 200 with a %d-byte header: %v (%s); want SUCCESS", size, v.Outcome, v.Detail)
		case size > sdk.MaxHTTPAnswerHeader && (v.Outcome != sdk.OutcomeTransient || !strings.Contains(v.Detail, strconv.Itoa(sdk.MaxHTTPAnswerHeader))):
			t.Errorf("a 200 with a %d-byte header: %v (%.200s); want TRANSIENT naming the %d-byte bound", size, v.Outcome, v.Detail, sdk.MaxHTTPAnswerHeader)
		}
	}
}
