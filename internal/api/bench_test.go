package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/notifyd/notifyd/internal/outbox"
)

// BenchmarkServer_Enqueue measures POST /v1/notifications end to end over
// loopback HTTP into a real Postgres: one notification per call, and
// batches of 100 and 1,000. notifications/s is the figure to compare.
func BenchmarkServer_Enqueue(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			bb := setup(b, setupOptions{})
			body := enqueueBody(n)
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for range b.N {
				req, _ := http.NewRequest("POST", bb.url+"/v1/notifications", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tokenA)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 202 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "notifications/s")
		})
	}
}

// BenchmarkOutbox_InsertBaseline is the same write without HTTP: what the
// API adds is the difference to BenchmarkServer_Enqueue.
func BenchmarkOutbox_InsertBaseline(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			bb := setup(b, setupOptions{})
			ns := make([]outbox.NewNotification, n)
			for i := range ns {
				ns[i] = outbox.NewNotification{Channel: "orders", Recipient: fmt.Sprint("user-", i),
					Payload: json.RawMessage(fmt.Sprintf(`{"text":"Your order shipped","order":%d}`, i))}
			}
			b.ResetTimer()
			for range b.N {
				if _, err := bb.store.Insert(bb.ctx, ns); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "notifications/s")
		})
	}
}

func enqueueBody(n int) []byte {
	item := `{"channel":"orders","recipient":"user-%d","payload":{"text":"Your order shipped","order":%d}}`
	if n == 1 {
		return []byte(fmt.Sprintf(item, 1, 1))
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(item, i, i)
	}
	return []byte(`{"notifications":[` + strings.Join(parts, ",") + `]}`)
}
