package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/client"
)

// randomText is n random characters: mostly ASCII letters and punctuation,
// some multi-byte (Hangul, emoji), as a hostile client's junk would be.
func randomText(r *rand.Rand, n int) string {
	const ascii = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@+!#$%&'*/=?^`{|}~ \"\\"
	var b strings.Builder
	for range n {
		switch r.IntN(10) {
		case 0:
			b.WriteRune(rune(0xAC00 + r.IntN(11172))) // Hangul syllable
		case 1:
			b.WriteRune(rune(0x1F600 + r.IntN(80))) // emoji
		default:
			b.WriteByte(ascii[r.IntN(len(ascii))])
		}
	}
	return b.String()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// is4xxNaming says whether an answer refuses the input and names field.
func is4xxNaming(status int, body, field string) bool {
	return status >= 400 && status < 500 && strings.Contains(body, field)
}

// longRecipient is issue 16's first reproduction: a 3,200-character
// recipient once jammed every settle worker. It must be refused where it
// enters (API single and batch, CLI, a subscriber's address), everything
// around it delivered, cancel never a 500, the daemon up and ready.
func longRecipient(t *testing.T, d *daemon) {
	r := rand.New(rand.NewPCG(16, 3200))
	longs := []string{randomASCII(r, 3200), randomText(r, 3200)}
	var normal []int64
	normal = append(normal, enqueueOK(t, d, "hooks", 25)...)
	for _, long := range longs {
		// One at a time, among normal ones.
		status, body := d.raw(t, "POST", "/v1/notifications", mustJSON(map[string]any{
			"channel": "hooks", "recipient": long, "payload": map[string]string{"text": "hi"}}))
		if !is4xxNaming(status, body, "recipient") {
			t.Errorf("POST /v1/notifications with a %d-byte recipient: %d %.300s; want a 4xx naming recipient", len(long), status, body)
		}
		normal = append(normal, enqueueOK(t, d, "hooks", 5)...)
		// In a batch: all or none, the field named with its index.
		items := make([]map[string]any, 10)
		for i := range items {
			items[i] = map[string]any{"channel": "hooks", "recipient": fmt.Sprintf("batch-%d", i), "payload": map[string]string{"text": "hi"}}
		}
		items[6]["recipient"] = long
		status, body = d.raw(t, "POST", "/v1/notifications", mustJSON(map[string]any{"notifications": items}))
		if !is4xxNaming(status, body, "notifications[6].recipient") {
			t.Errorf("a batch with a %d-byte recipient at [6]: %d %.300s; want a 4xx naming notifications[6].recipient", len(long), status, body)
		}
		// Through the CLI.
		out, err := d.cli("send", "--channel", "hooks", "--recipient", long, "--payload", `{"text":"hi"}`)
		if err == nil || cli5xx.MatchString(out) || !strings.Contains(out, "recipient") {
			t.Errorf("notifyd send with a %d-byte recipient: exit %v, %.300s; want a failure naming recipient, not a 5xx", len(long), err, out)
		}
	}
	// A subscriber's address becomes a campaign's recipient: the same hole.
	status, body := d.raw(t, "PUT", "/v1/subscribers/long-address", mustJSON(map[string]any{
		"addresses": map[string]string{"hooks": randomASCII(r, 10_000)}, "topics": []string{"news"}}))
	if !is4xxNaming(status, body, "address") {
		t.Errorf("PUT /v1/subscribers/long-address with a 10 KB address: %d %.300s; want a 4xx naming the address", status, body)
	}
	normal = append(normal, enqueueOK(t, d, "hooks", 25)...)
	for id, n := range d.waitFinal(t, normal, 60*time.Second) {
		if n.Status != "SENT" {
			t.Errorf("notification %d beside the long recipients: %s (%q), want SENT", id, n.Status, n.LastError)
		}
	}

	// notifyd cancel: on a SENT notification (409), on one scheduled for
	// later (cancelled), on one that does not exist (404): never a 500.
	later, err := d.cli("send", "--channel", "hooks", "--recipient", "cancel-me", "--payload", `{"text":"hi"}`, "--at", "1h")
	if err != nil {
		t.Fatalf("notifyd send --at 1h: %v %s", err, later)
	}
	laterID := strings.TrimSpace(later)
	for _, c := range []struct {
		id     string
		wantOK bool
	}{{strconv.FormatInt(normal[0], 10), false}, {laterID, true}, {laterID, true}, {"9000000000000000000", false}} {
		out, err := d.cli("cancel", c.id)
		if cli5xx.MatchString(out) || (err == nil) != c.wantOK {
			t.Errorf("notifyd cancel %s: exit %v, %.300s; want success %v and never a 5xx", c.id, err, out, c.wantOK)
		}
	}
	if id, _ := strconv.ParseInt(laterID, 10, 64); id > 0 {
		if n, err := d.c.Notification(context.Background(), id); err != nil || n.Status != "CANCELLED" {
			t.Errorf("notification %d after notifyd cancel: %+v, %v; want CANCELLED", id, n, err)
		}
	}

	d.alive(t)
	if rd, err := d.c.Ready(context.Background()); err != nil || rd.Status != "ready" {
		t.Errorf("/readyz = %+v, %v; want ready", rd, err)
	}
}

func randomASCII(r *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

// bombTemplate is issue 16's 138-byte campaign: three nested ranges over a
// subscriber's list, n³ iterations (8 MB from 200 elements).
const bombTemplate = `{{range .data.l}}{{range $.data.l}}{{range $.data.l}}x{{end}}{{end}}{{end}}`

// templateBomb is issue 16's second reproduction. The daemon stays up with
// bounded memory, the job does not stay RUNNING, the bomb's notification
// (if one was made) is FAILED with a reason, and a small list's
// notification and API notifications sent meanwhile are SENT.
func templateBomb(t *testing.T, d *daemon) {
	ctx := context.Background()
	for _, n := range []int{200, 2000} {
		topic := fmt.Sprintf("bomb%d", n)
		list := make([]int, n)
		for i := range list {
			list[i] = i
		}
		for _, s := range []client.Subscriber{
			{ExternalID: topic + "-victim", Addresses: map[string]string{"hooks": topic + "-victim"}, Attributes: map[string]any{"l": list}, Topics: []string{topic}},
			{ExternalID: topic + "-small", Addresses: map[string]string{"hooks": topic + "-small"}, Attributes: map[string]any{"l": []int{0, 1}}, Topics: []string{topic}},
		} {
			if _, err := d.c.PutSubscriber(ctx, s); err != nil {
				t.Fatalf("PUT subscriber %s: %v", s.ExternalID, err)
			}
		}
		status, body := d.raw(t, "POST", "/v1/campaigns", []byte(`{"channel":"hooks","audience":{"topic":"`+topic+`"},"payload":{"x":"`+bombTemplate+`"}}`))
		if status != 202 {
			t.Fatalf("POST /v1/campaigns (the %d-element bomb): %d %s; want 202", n, status, body)
		}
		var job client.Job
		if err := json.Unmarshal([]byte(body), &job); err != nil || job.ID == 0 {
			t.Fatalf("POST /v1/campaigns answer %s: %v", body, err)
		}
		normal := enqueueOK(t, d, "hooks", 20)

		j, maxRSS := d.waitJob(t, job.ID, 60*time.Second)
		t.Logf("%d elements: job %s, done %d, failed %d, error %q; notifyd's VmRSS peaked at %d MB while it ran", n, j.State, j.Done, j.Failed, j.Error, maxRSS>>20)
		if j.State == "FAILED" && j.Error == "" {
			t.Errorf("job %d FAILED without a reason", job.ID)
		}

		byRecipient := d.jobNotifications(t, job.ID)
		if v, ok := byRecipient[topic+"-victim"]; ok {
			if v.Status != "FAILED" || v.LastError == "" {
				t.Errorf("the bomb's notification %d: %s (%q); want FAILED with a reason", v.ID, v.Status, v.LastError)
			}
		}
		if j.State == "DONE" {
			if s, ok := byRecipient[topic+"-small"]; !ok {
				t.Errorf("job %d DONE but made no notification for %s-small", job.ID, topic)
			} else {
				normal = append(normal, s.ID)
			}
		}
		for id, x := range d.waitFinal(t, normal, 60*time.Second) {
			if x.Status != "SENT" {
				t.Errorf("notification %d sent beside the %d-element bomb: %s (%q), want SENT", id, n, x.Status, x.LastError)
			}
		}
		d.alive(t)
		if maxRSS > 1<<30 {
			t.Errorf("notifyd's VmRSS reached %d MB during the %d-element bomb, want under 1 GiB", maxRSS>>20, n)
		}
	}
	if hwm := d.memory(t, "VmHWM"); hwm > 1<<30 {
		t.Errorf("notifyd's peak resident memory (VmHWM) is %d MB, want under 1 GiB", hwm>>20)
	}
}

// jobNotifications reads a job's notifications through the API, by
// recipient; only their ids come from the database (the API lists no
// notifications by job).
func (d *daemon) jobNotifications(t testing.TB, job int64) map[string]*client.NotificationInfo {
	t.Helper()
	ctx := context.Background()
	rows, err := d.db.Pool.Query(ctx, `SELECT id FROM notifications WHERE job_id = $1`, job)
	if err != nil {
		t.Fatalf("the notifications of job %d: %v", job, err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("the notifications of job %d: %v", job, err)
	}
	out := map[string]*client.NotificationInfo{}
	for _, id := range ids {
		n, err := d.c.Notification(ctx, id)
		if err != nil {
			t.Fatalf("GET /v1/notifications/%d: %v", id, err)
		}
		out[n.Recipient] = n
	}
	return out
}

// waitJob waits until job is DONE or FAILED, the daemon alive throughout,
// and answers it with the largest VmRSS sampled meanwhile.
func (d *daemon) waitJob(t *testing.T, id int64, within time.Duration) (*client.Job, int64) {
	t.Helper()
	var maxRSS int64
	deadline := time.Now().Add(within)
	for {
		d.alive(t)
		maxRSS = max(maxRSS, d.memory(t, "VmRSS"))
		j, err := d.c.Job(context.Background(), id)
		if err != nil {
			t.Fatalf("GET /v1/jobs/%d: %v", id, err)
		}
		if j.State == "DONE" || j.State == "FAILED" {
			return j, maxRSS
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d still %s after %v (error %q)", id, j.State, within, j.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
