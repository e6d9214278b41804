package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/client"
)

// hookRecorder is the hook channel's receiver: it answers 204 and counts
// the dead letters each hook notification lists.
type hookRecorder struct {
	*httptest.Server
	mu      sync.Mutex
	told    map[int64]int
	bodies  int
	largest int // the largest payload received, in bytes
	bad     []string
}

func newHookRecorder(t *testing.T) *hookRecorder {
	r := &hookRecorder{told: map[int64]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var env struct {
			Payload json.RawMessage `json:"payload"`
		}
		var batch outbox.DeadLetterBatch
		err := json.Unmarshal(body, &env)
		if err == nil {
			err = json.Unmarshal(env.Payload, &batch)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.bodies++
		r.largest = max(r.largest, len(env.Payload))
		if err != nil || batch.Count != len(batch.DeadLetters) {
			r.bad = append(r.bad, fmt.Sprintf("%.200s (%v)", body, err))
		}
		for _, d := range batch.DeadLetters {
			r.told[d.ID]++
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// waitTold waits until every id has been told, and fails naming how many
// were not.
func (r *hookRecorder) waitTold(t *testing.T, ids []int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r.mu.Lock()
		var missing []int64
		for _, id := range ids {
			if r.told[id] == 0 {
				missing = append(missing, id)
			}
		}
		bodies := r.bodies
		r.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d dead letters not told through the hook within %s (%d hook notifications received), e.g. %v",
				len(missing), len(ids), within, bodies, missing[:min(len(missing), 5)])
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deadHook is issue 26's dead-letter hook that jammed: 250 dead letters
// whose recipients are 1,000 '<' each and idempotency keys 512 (JSON
// escapes each '<' as \u003c, six bytes) once made a hook payload over the
// 1 MiB bound, retried every `every` forever, so no later dead letter of
// the channel was told. Every
// one must be told, in hook notifications under the bound, and a later one
// too. Its own daemon: the 250 dead letters and the hook are its alone.
func deadHook(t *testing.T) {
	rec := newHookRecorder(t)
	d := start(t, withChannels(func(d *daemon) string {
		return fmt.Sprintf(`
  deadletters:
    plugin: webhook
    config: {url: %q, timeout: 5s}
    retry: {max_attempts: 1}
    breaker: {failures: -1}
    dead_letter_hook: {channel: deadhook, recipient: oncall, batch: 500, every: 3s}
  deadhook:
    plugin: webhook
    config: {url: %q, timeout: 10s}
`, d.reject.URL+"/hook", rec.URL+"/told")
	}))
	ns := make([]client.Notification, 250)
	for i := range ns {
		ns[i] = client.Notification{Channel: "deadletters", Recipient: strings.Repeat("<", 996) + fmt.Sprintf("%04d", i),
			IdempotencyKey: strings.Repeat("<", 508) + fmt.Sprintf("%04d", i), Payload: json.RawMessage(`{"text":"hi"}`)}
	}
	var ids []int64
	for chunk := range slices.Chunk(ns, 50) { // the client escapes '<' too: 6 KB each
		res, err := d.c.EnqueueBatch(context.Background(), chunk)
		if err != nil {
			t.Fatalf("enqueue %d notifications to 1,000-'<' recipients: %v", len(chunk), err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	for id, n := range d.waitFinal(t, ids, 120*time.Second) {
		if n.Status != "FAILED" {
			t.Errorf("notification %d is %s; want FAILED (the receiver answers 400)", id, n.Status)
		}
	}
	rec.waitTold(t, ids, 120*time.Second)

	// A later dead letter of the same channel is told too.
	later := enqueueTo(t, d, "deadletters", "later", 1)
	d.waitFinal(t, later, 60*time.Second)
	rec.waitTold(t, later, 60*time.Second)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.bad) > 0 {
		t.Errorf("%d hook bodies are not dead-letter batches, e.g. %s", len(rec.bad), rec.bad[0])
	}
	if rec.bodies < 2 || rec.largest > outbox.MaxPayloadBytes {
		t.Errorf("%d hook notifications, the largest payload %d bytes; want several (250 such dead letters exceed one payload), each at most %d",
			rec.bodies, rec.largest, outbox.MaxPayloadBytes)
	}
	d.alive(t)
}
