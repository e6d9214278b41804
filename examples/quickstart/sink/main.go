// Command sink is the quickstart's webhook receiver: it prints every delivery
// and plays a few failure parts chosen by the recipient, so `make demo` shows
// retries and dead letters:
//
//	recipient "flaky"  → 503 twice, then 200
//	recipient "reject" → 400 the first time (a permanent failure: dead-lettered),
//	                     200 after that (the demo replays the dead letter)
//	anything else      → 200
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:8787", "address to listen on (loopback)")
	flag.Parse()
	var mu sync.Mutex
	seen := map[string]int{}
	http.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var env struct {
			ID        int64           `json:"id"`
			Recipient string          `json:"recipient"`
			Attempt   int             `json:"attempt"`
			Payload   json.RawMessage `json:"payload"`
		}
		_ = json.Unmarshal(body, &env)
		mu.Lock()
		seen[env.Recipient]++
		n := seen[env.Recipient]
		mu.Unlock()
		status := http.StatusOK
		switch {
		case env.Recipient == "reject" && n == 1:
			status = http.StatusBadRequest
		case env.Recipient == "flaky" && n <= 2:
			status = http.StatusServiceUnavailable
		}
		fmt.Printf("sink: notification %d to %q attempt %d webhook-id=%s payload=%s → %d\n",
			env.ID, env.Recipient, env.Attempt, r.Header.Get("webhook-id"), env.Payload, status)
		w.WriteHeader(status)
		if status == http.StatusBadRequest {
			_, _ = io.WriteString(w, `{"error":"unknown recipient"}`)
		}
	})
	log.Printf("sink listening on http://%s/hook", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
