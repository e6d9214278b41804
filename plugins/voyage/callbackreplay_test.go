package main

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/notifyd/notifyd/sdk"
	"github.com/notifyd/notifyd/sdk/sdktest"
)

// TestSender_Send_callbackDroppedAfterTheRequest: a callback receiver that
// reads the callback and closes the connection unanswered may have acted on
// it. net/http replays a request carrying an Idempotency-Key (every callback
// does) when a reused connection fails before the answer's first byte, on
// every idle connection in turn and then on a new one: one Send posted the
// embeddings to the receiver once per idle connection plus one (the plugin's
// transport keeps 64 a host). At most one replay now, as sdk.HTTPSender.
func TestSender_Send_callbackDroppedAfterTheRequest(t *testing.T) {
	t.Parallel()
	const warm = 8
	f, cb := newFakeVoyage(t), sdktest.NewDroppingReceiver(t, "/cb", warm)
	raw, _ := json.Marshal(map[string]any{"api_key": testKey, "base_url": f.URL, "model": "voyage-3.5",
		"callback_url": cb.URL, "rpm": 0, "tpm": 0})
	s, err := (&provider{}).Configure(context.Background(), sdk.ConfigureRequest{Channel: "embed", Config: raw, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range warm {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := message(`{"input":"a"}`)
			m.ID, m.IdempotencyKey = int64(100+i), ""
			if v := s.Send(context.Background(), m); v.Outcome != sdk.OutcomeSuccess {
				t.Errorf("warm-up send %d: %v (%s)", i, v.Outcome, v.Detail)
			}
		}()
	}
	wg.Wait()
	cb.Drop()

	v := s.Send(context.Background(), message(`{"input":"a"}`))
	if v.Outcome != sdk.OutcomeTransient {
		t.Errorf("verdict %v (%s); want TRANSIENT", v.Outcome, v.Detail)
	}
	// Every callback was counted before its connection closed, which was
	// before the send returned.
	if got := cb.Dropped(); got < 1 || got > 2 {
		t.Errorf("the receiver got the callback %d times in one send (%s); want 1 or 2", got, v.Detail)
	}
}
