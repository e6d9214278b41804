package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/client"
)

// TestHostile runs the reproductions and the fuzz against one daemon.
func TestHostile(t *testing.T) {
	d := start(t)
	pid := d.cmd.Process.Pid
	t.Run("a 3,200-character recipient", func(t *testing.T) { longRecipient(t, d) })
	t.Run("a campaign that renders megabytes", func(t *testing.T) { templateBomb(t, d) })
	t.Run("fuzz", func(t *testing.T) { fuzz(t, d) })
	d.alive()
	if d.cmd.Process.Pid != pid {
		t.Fatalf("notifyd's pid changed: %d → %d", pid, d.cmd.Process.Pid)
	}
	if rss := d.rssBytes(); rss > 1<<30 {
		t.Errorf("notifyd's resident memory is %d MB, want under 1 GiB", rss>>20)
	}
}

func enqueueOK(t *testing.T, d *daemon, channel string, n int) []int64 {
	t.Helper()
	ns := make([]client.Notification, n)
	for i := range ns {
		ns[i] = client.Notification{Channel: channel, Recipient: fmt.Sprintf("user-%d", i), Payload: json.RawMessage(`{"text":"hi"}`)}
	}
	res, err := d.c.EnqueueBatch(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// longRecipient: the reproduction of a recipient a btree cannot index. It
// is refused, naming the field; everything around it is delivered; cancel
// never answers 500; readiness stays true.
func longRecipient(t *testing.T, d *daemon) {
	before := enqueueOK(t, d, "hooks", 50)
	long := strings.Repeat("가", 1067) // 3,201 bytes, random-ish text
	status, body := d.raw("POST", "/v1/notifications",
		[]byte(`{"channel":"hooks","recipient":"`+long+`","payload":{"text":"hi"}}`))
	if status != 422 || !strings.Contains(body, "recipient") || !strings.Contains(body, "at most 1024") {
		t.Errorf("3,201-byte recipient: %d %s; want 422 naming recipient and its bound", status, body)
	}
	status, body = d.raw("PUT", "/v1/subscribers/long-address",
		[]byte(`{"addresses":{"hooks":"`+strings.Repeat("a", 10_000)+`"},"topics":["news"]}`))
	if status != 422 || !strings.Contains(body, "address") {
		t.Errorf("10 KB subscriber address: %d %s; want 422 naming the address", status, body)
	}
	after := enqueueOK(t, d, "hooks", 50)
	for id, n := range d.waitFinal(append(before, after...), 60*time.Second) {
		if n.Status != "SENT" {
			t.Errorf("notification %d: %s (%q), want SENT", id, n.Status, n.LastError)
		}
	}
	out, err := d.cli("cancel", strconv.FormatInt(after[0], 10))
	if strings.Contains(out, "500") || strings.Contains(out, "internal") {
		t.Errorf("notifyd cancel of a SENT notification: %v %s; want an answer that is not a 500", err, out)
	}
	if r, err := d.c.Ready(context.Background()); err != nil || r.Status != "ready" {
		t.Errorf("/readyz = %+v, %v; want ready", r, err)
	}
}

// templateBomb: three nested ranges over a subscriber's list (8 MB from 200
// elements; out of memory from 2,000). The daemon stays up, the job
// finishes, that notification is FAILED naming the bound, the others go.
func templateBomb(t *testing.T, d *daemon) {
	ctx := context.Background()
	for _, n := range []int{200, 2000} {
		topic := fmt.Sprintf("bomb%d", n)
		list := make([]any, n)
		for i := range list {
			list[i] = i
		}
		if _, err := d.c.PutSubscriber(ctx, client.Subscriber{ExternalID: topic + "-victim", Addresses: map[string]string{"hooks": topic + "-victim"},
			Attributes: map[string]any{"l": list}, Topics: []string{topic}}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.c.PutSubscriber(ctx, client.Subscriber{ExternalID: topic + "-plain", Addresses: map[string]string{"hooks": topic + "-plain"},
			Topics: []string{topic}}); err != nil {
			t.Fatal(err)
		}
		job, err := d.c.CreateCampaign(ctx, client.Campaign{Channel: "hooks", Audience: client.Audience{Topic: topic},
			Payload: map[string]any{"x": `{{with index .data "l"}}{{range .}}{{range $.data.l}}{{range $.data.l}}x{{end}}{{end}}{{end}}{{else}}plain{{end}}`}})
		if err != nil {
			t.Fatal(err)
		}
		normal := enqueueOK(t, d, "hooks", 20)
		deadline := time.Now().Add(60 * time.Second)
		for {
			j, err := d.c.Job(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.State == "DONE" || j.State == "FAILED" {
				if j.State != "DONE" || j.Failed != 1 {
					t.Errorf("job over a %d-element list: %s, failed %d (%s); want DONE with 1 failed", n, j.State, j.Failed, j.Error)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job over a %d-element list still %s after 60 s", n, j.State)
			}
			time.Sleep(100 * time.Millisecond)
		}
		page, err := d.c.DLQ(ctx, client.DLQQuery{Channel: "hooks", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range page.Notifications {
			if f.Recipient == topic+"-victim" {
				found = true
				if !strings.Contains(f.LastError, "bound") {
					t.Errorf("the bomb's notification FAILED with %q, want the bound named", f.LastError)
				}
			}
		}
		if !found {
			t.Errorf("no dead letter for %s-victim", topic)
		}
		for id, x := range d.waitFinal(normal, 60*time.Second) {
			if x.Status != "SENT" {
				t.Errorf("notification %d sent beside the bomb: %s, want SENT", id, x.Status)
			}
		}
		d.alive()
	}
}

// fuzz sends a seeded stream of hostile requests.
func fuzz(t *testing.T, d *daemon) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("NOTIFYD_HOSTILE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay: NOTIFYD_HOSTILE_SEED=%d)", seed, seed)
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	var accepted []int64
	var fivexx []string
	const requests = 400
	for range requests {
		method, path, body := g.request()
		status, answer := d.raw(method, path, body)
		if status >= 500 {
			fivexx = append(fivexx, fmt.Sprintf("%s %.120q → %d %.200s (body %.200q)", method, path, status, answer, body))
			continue
		}
		if method == "POST" && path == "/v1/notifications" && (status == 200 || status == 202) {
			accepted = append(accepted, ids(answer)...)
		}
	}
	for _, args := range g.cliCommands() {
		out, _ := d.cli(args...)
		if strings.Contains(out, "(500") || strings.Contains(out, " 500 ") || strings.Contains(out, "internal error") {
			fivexx = append(fivexx, fmt.Sprintf("notifyd %q → %s", args, out))
		}
	}
	if _, err := d.cli("channels", "resume", "hooks"); err != nil {
		t.Errorf("resume hooks: %v", err)
	}
	if len(fivexx) > 0 {
		t.Errorf("%d answers were 5xx (seed %d):\n%s", len(fivexx), seed, strings.Join(fivexx, "\n"))
	}
	d.alive()
	if len(accepted) == 0 {
		t.Fatalf("the fuzz had no notification accepted (seed %d): it tested nothing end to end", seed)
	}
	t.Logf("%d requests, %d notifications accepted", requests, len(accepted))
	// Those the fuzz scheduled for 2099 are cancelled: a final state too.
	for _, id := range accepted {
		n, err := d.c.Notification(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if n.Status == "PENDING" && n.DueAt.After(time.Now().Add(time.Hour)) {
			if _, err := d.c.Cancel(context.Background(), id); err != nil {
				t.Errorf("cancel scheduled notification %d: %v", id, err)
			}
		}
	}
	d.waitFinal(accepted, 90*time.Second)
}

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
