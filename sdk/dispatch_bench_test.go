package sdk

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/notifyd/notifyd/sdk/proto/providerv1"
)

// BenchmarkServer_Send is the plugin side of one Send call without gRPC:
// a batch of 256 messages, as notifyd sends a burst, routed, fanned out to
// the worker goroutines and answered, to a Sender that answers SUCCESS at
// once. What it measures is the SDK's own cost per message: read allocs/op
// (per batch) and B/op; ns/op is indicative on a busy machine.
//
//	cd sdk && go test . -run '^$' -bench Server_Send -benchmem
func BenchmarkServer_Send(b *testing.B) {
	s := newServer(benchProvider{}, Info{Name: "bench"}, hclog.NewNullLogger(), tracing{plugin: "bench"})
	ctx := context.Background()
	if r, _ := s.Configure(ctx, &providerv1.ConfigureRequest{Channel: "bench", Config: []byte("{}")}); r.Error != "" {
		b.Fatal(r.Error)
	}
	payload := []byte(`{"title":"Daily quiz #1042","text":"Which planet has the most moons?"}`)
	req := &providerv1.SendRequest{}
	for i := range 256 {
		req.Messages = append(req.Messages, &providerv1.Message{Id: int64(1e9 + i), Channel: "bench",
			Recipient: fmt.Sprintf("user-%07d", i), Payload: payload, Attempt: 1,
			IdempotencyKey: fmt.Sprintf("notifyd-%d", 1e9+i)})
	}
	b.ReportAllocs()
	for b.Loop() {
		dl := time.Now().Add(10 * time.Second).UnixNano()
		for _, m := range req.Messages {
			m.DeadlineUnixNano = dl
		}
		resp, err := s.Send(ctx, req)
		if err != nil || resp.Verdicts[0].Outcome != providerv1.Outcome_OUTCOME_SUCCESS {
			b.Fatalf("Send: %v %v", resp, err)
		}
	}
	b.ReportMetric(float64(b.N*len(req.Messages))/b.Elapsed().Seconds(), "msgs/s")
}

type benchProvider struct{}

func (benchProvider) Describe() Info { return Info{Name: "bench"} }

func (benchProvider) Configure(context.Context, ConfigureRequest) (Sender, error) {
	return SenderFunc(func(context.Context, Message) Verdict { return Success(nil) }), nil
}
