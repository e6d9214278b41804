package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/notifyd/notifyd/sdk/client"
)

// TestHostile runs the reproductions and the fuzz against one daemon.
func TestHostile(t *testing.T) {
	configured := newHeaderCapture(t)
	d := start(t, withChannels(recipientURLChannel(configured)))
	t.Run("a campaign that prints a string ×10 a level", func(t *testing.T) { renderMemory(t, d) }) // first: its VmHWM bound
	t.Run("a 3,200-character recipient", func(t *testing.T) { longRecipient(t, d) })
	t.Run("numbers that expand on read-back", func(t *testing.T) { expandingNumbers(t, d) })
	t.Run("a recipient-chosen URL", func(t *testing.T) { recipientURL(t, d, configured) })
	t.Run("a campaign that renders megabytes", func(t *testing.T) { templateBomb(t, d) })
	t.Run("fuzz", func(t *testing.T) { fuzz(t, d) })
	t.Run("hostile receivers", func(t *testing.T) { receivers(t, d) })
	t.Run("dead-letter hook", func(t *testing.T) { deadHook(t) })
	t.Run("a plugin whose grandchild holds its pipes", pluginStart)
	t.Run("door", func(t *testing.T) { door(t, d) })
	// Last: a template the daemon cannot stop may hold a job and a core.
	t.Run("hostile templates", func(t *testing.T) { templates(t, d) })
	d.alive(t)
	if rss := d.memory(t, "VmRSS"); rss > 1<<30 {
		t.Errorf("notifyd's resident memory is %d MB, want under 1 GiB", rss>>20)
	}
	if panics, first := d.panics(); panics > 0 {
		t.Errorf("notifyd logged %d panics; the first: %s", panics, first)
	}
}

// enqueueOK enqueues n ordinary notifications through the Go client.
func enqueueOK(t *testing.T, d *daemon, channel string, n int) []int64 {
	t.Helper()
	return enqueueTo(t, d, channel, "user", n)
}

// enqueueTo enqueues n notifications to recipients prefix-0, prefix-1, …
func enqueueTo(t *testing.T, d *daemon, channel, prefix string, n int) []int64 {
	t.Helper()
	ns := make([]client.Notification, n)
	for i := range ns {
		ns[i] = client.Notification{Channel: channel, Recipient: fmt.Sprintf("%s-%d", prefix, i), Payload: json.RawMessage(`{"text":"hi"}`)}
	}
	res, err := d.c.EnqueueBatch(context.Background(), ns)
	if err != nil {
		t.Fatalf("enqueue %d normal notifications on %s: %v", n, channel, err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// ids reads the notification ids of an enqueue answer, one or a batch.
func ids(answer string) []int64 {
	var one client.Enqueued
	if json.Unmarshal([]byte(answer), &one) == nil && one.ID > 0 {
		return []int64{one.ID}
	}
	var batch client.EnqueuedBatch
	_ = json.Unmarshal([]byte(answer), &batch)
	out := make([]int64, 0, len(batch.Notifications))
	for _, n := range batch.Notifications {
		out = append(out, n.ID)
	}
	return out
}
