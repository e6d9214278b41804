package pluginhost_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk"
)

// BenchmarkPlugin_Send measures Send through gRPC to a real plugin process
// whose Send does nothing: the cost of the protocol, the host and the sdk's
// fan-out. msgs/s is the figure to watch (target ≥ 100,000 at batch 256).
func BenchmarkPlugin_Send(b *testing.B) {
	for _, size := range []int{1, 256} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			p := setup(b).behave(b)
			payload := json.RawMessage(`{"text":"Today's quiz: what is 6 x 7?"}`)
			ms := make([]sdk.Message, size)
			for i := range ms {
				ms[i] = sdk.Message{ID: int64(i + 1), Channel: "ch", Recipient: fmt.Sprint("user-", i), Payload: payload, Attempt: 1, IdempotencyKey: fmt.Sprint(i + 1)}
			}
			for b.Loop() {
				dl := time.Now().Add(10 * time.Second)
				for i := range ms {
					ms[i].Deadline = dl
				}
				vs := p.Send(b.Context(), ms)
				if vs[0].Outcome != sdk.OutcomeSuccess {
					b.Fatalf("verdict: %+v", vs[0])
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
