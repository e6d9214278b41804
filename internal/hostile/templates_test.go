package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/sdk/client"
)

// hostileTemplates are campaign payload templates past the two:
// each must end its recipient's notification FAILED with a reason (or, for
// wantSent, delivered) and its job DONE or FAILED, never RUNNING for good,
// with the daemon up and its memory bounded. Data is {"l":[0..199]}.
var hostileTemplates = []struct {
	name, tmpl string
	wantSent   bool // an odd but renderable payload
}{
	{name: "a range over a billion", tmpl: `{{range 1000000000}}{{end}}`},
	{name: "a NUL rendered", tmpl: `{{printf "%c" 0}}`},
	{name: "invalid UTF-8 rendered", tmpl: `{{"\xff\xfe"}}`, wantSent: true},
	{name: "a slice past the end", tmpl: `{{slice .data.l 0 99999999}}`},
	{name: "the whole list printed 5,000 times", tmpl: strings.Repeat(`{{.data.l}}`, 5000)},
	{name: "recursion to text/template's depth", tmpl: `{{define "a"}}{{template "a" .}}{{end}}{{template "a" .}}`},
	// Two recursive calls a level over a 200-element list: 2^200 calls,
	// with no range, no output and no depth to stop it; only a time limit
	// on rendering ends it. Last, so a job it holds cannot delay the others.
	{name: "exponential recursion", tmpl: `{{define "a"}}{{if .}}{{template "a" (slice . 1)}}{{template "a" (slice . 1)}}{{end}}{{end}}{{template "a" .data.l}}`},
}

// templates sends every hostile template as its own campaign to one
// subscriber, and normal notifications meanwhile.
func templates(t *testing.T, d *daemon) {
	ctx := context.Background()
	list := make([]int, 200)
	for i := range list {
		list[i] = i
	}
	jobs := make([]int64, len(hostileTemplates))
	for i, h := range hostileTemplates {
		topic := fmt.Sprintf("tpl%d", i)
		if _, err := d.c.PutSubscriber(ctx, client.Subscriber{ExternalID: topic + "-victim", Addresses: map[string]string{"hooks": topic + "-victim"},
			Attributes: map[string]any{"l": list}, Topics: []string{topic}}); err != nil {
			t.Fatalf("PUT subscriber %s-victim: %v", topic, err)
		}
		status, body := d.raw(t, "POST", "/v1/campaigns", mustJSON(map[string]any{"channel": "hooks", "audience": map[string]string{"topic": topic},
			"payload": map[string]string{"x": h.tmpl}}))
		var job client.Job
		if status != 202 || json.Unmarshal([]byte(body), &job) != nil || job.ID == 0 {
			t.Errorf("%s: POST /v1/campaigns: %d %.300s; want 202 with a job", h.name, status, body)
			continue
		}
		jobs[i] = job.ID
	}
	normal := enqueueOK(t, d, "hooks", 20)

	var maxRSS int64
	deadline := time.Now().Add(60 * time.Second)
	final := make([]*client.Job, len(jobs))
	for {
		d.alive(t)
		maxRSS = max(maxRSS, d.memory(t, "VmRSS"))
		left := 0
		for i, id := range jobs {
			if id == 0 || final[i] != nil {
				continue
			}
			j, err := d.c.Job(ctx, id)
			if err != nil {
				t.Fatalf("GET /v1/jobs/%d: %v", id, err)
			}
			if j.State == "DONE" || j.State == "FAILED" {
				final[i] = j
				continue
			}
			left++
		}
		if left == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rd, err := d.c.Ready(ctx); err == nil {
		t.Logf("/readyz after the templates: %s %v", rd.Status, rd.Checks)
	}
	for i, h := range hostileTemplates {
		j := final[i]
		if jobs[i] == 0 {
			continue
		}
		if j == nil {
			now, _ := d.c.Job(ctx, jobs[i])
			t.Errorf("%s: job %d not DONE or FAILED 60 s after it was created: %+v", h.name, jobs[i], now)
			continue
		}
		t.Logf("%s: job %s, done %d, failed %d, error %q", h.name, j.State, j.Done, j.Failed, j.Error)
		if j.State == "FAILED" && j.Error == "" {
			t.Errorf("%s: job %d FAILED without a reason", h.name, j.ID)
		}
		v, ok := d.jobNotifications(t, j.ID)[fmt.Sprintf("tpl%d-victim", i)]
		if !ok {
			continue
		}
		got := d.waitFinal(t, []int64{v.ID}, 30*time.Second)[v.ID]
		switch {
		case got == nil:
		case h.wantSent && got.Status != "SENT":
			t.Errorf("%s: notification %d %s (%q); want SENT", h.name, v.ID, got.Status, got.LastError)
		case !h.wantSent && (got.Status != "FAILED" || got.LastError == ""):
			t.Errorf("%s: notification %d %s (%q); want FAILED with a reason", h.name, v.ID, got.Status, got.LastError)
		}
	}
	for id, x := range d.waitFinal(t, normal, 60*time.Second) {
		if x.Status != "SENT" {
			t.Errorf("notification %d sent beside the hostile templates: %s (%q), want SENT", id, x.Status, x.LastError)
		}
	}
	d.alive(t)
	t.Logf("notifyd's VmRSS peaked at %d MB while the templates ran", maxRSS>>20)
	if maxRSS > 1<<30 {
		t.Errorf("notifyd's VmRSS reached %d MB during the hostile templates, want under 1 GiB", maxRSS>>20)
	}
}
