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

// chainBomb is issue 26's campaign template: a 10-byte string, then levels
// variables each printed from ten of the previous one, then the last one's
// length. No range, no output. 8 levels build 1 GB (4 out-of-memory crashes
// in 4.5 minutes before the job was failed); 7 levels build 100 MB, which
// rendered and was sent at 427 MB resident.
func chainBomb(levels int) string {
	var b strings.Builder
	b.WriteString(`{{$v0 := "xxxxxxxxxx"}}`)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "{{$v%d := print%s}}", i, strings.Repeat(fmt.Sprintf(" $v%d", i-1), 10))
	}
	fmt.Fprintf(&b, "{{len $v%d}}", levels)
	return b.String()
}

// renderMemory sends each bomb as a campaign to a victim (whose data turns
// the bomb on) and a bystander, with ordinary notifications meanwhile. The
// daemon stays up under 300 MB resident, the victim's notification is
// FAILED naming the memory bound, the bystander's and the ordinary ones are
// SENT. Run first, so VmHWM is this test's peak.
func renderMemory(t *testing.T, d *daemon) {
	ctx := context.Background()
	var maxRSS int64
	for _, levels := range []int{8, 7} {
		topic := fmt.Sprintf("chain%d", levels)
		for _, s := range []client.Subscriber{
			{ExternalID: topic + "-victim", Addresses: map[string]string{"hooks": topic + "-victim"}, Attributes: map[string]any{"bomb": true}, Topics: []string{topic}},
			{ExternalID: topic + "-bystander", Addresses: map[string]string{"hooks": topic + "-bystander"}, Topics: []string{topic}},
		} {
			if _, err := d.c.PutSubscriber(ctx, s); err != nil {
				t.Fatalf("PUT subscriber %s: %v", s.ExternalID, err)
			}
		}
		tmpl := `{{if index .data "bomb"}}` + chainBomb(levels) + `{{else}}hi{{end}}`
		status, body := d.raw(t, "POST", "/v1/campaigns", mustJSON(map[string]any{"channel": "hooks",
			"audience": map[string]string{"topic": topic}, "payload": map[string]string{"x": tmpl}}))
		var job client.Job
		if status != 202 || json.Unmarshal([]byte(body), &job) != nil || job.ID == 0 {
			t.Fatalf("POST /v1/campaigns (%d levels): %d %.300s; want 202 with a job", levels, status, body)
		}
		normal := enqueueOK(t, d, "hooks", 5)

		j, rss := d.waitJob(t, job.ID, 60*time.Second)
		maxRSS = max(maxRSS, rss)
		if j.State != "DONE" || j.Failed != 1 {
			t.Errorf("%d levels: job %s, done %d, failed %d, error %q; want DONE with 1 failed", levels, j.State, j.Done, j.Failed, j.Error)
		}
		byRecipient := d.jobNotifications(t, job.ID)
		if v := byRecipient[topic+"-victim"]; v == nil {
			t.Errorf("%d levels: no notification for the victim; want one FAILED naming the memory bound", levels)
		} else if v.Status != "FAILED" || !strings.Contains(v.LastError, "memory bound") {
			t.Errorf("%d levels: the victim's notification %d %s (%.300q, payload %.100s); want FAILED naming the memory bound", levels, v.ID, v.Status, v.LastError, v.Payload)
		}
		if b := byRecipient[topic+"-bystander"]; b == nil {
			t.Errorf("%d levels: no notification for the bystander", levels)
		} else {
			normal = append(normal, b.ID)
		}
		for id, x := range d.waitFinal(t, normal, 60*time.Second) {
			if x.Status != "SENT" {
				t.Errorf("notification %d (%s) sent beside the %d-level bomb: %s (%q), want SENT", id, x.Recipient, levels, x.Status, x.LastError)
			}
		}
		maxRSS = max(maxRSS, d.memory(t, "VmRSS"))
	}
	d.alive(t)
	hwm := d.memory(t, "VmHWM")
	t.Logf("notifyd's VmRSS peaked at %d MB (sampled), VmHWM %d MB", maxRSS>>20, hwm>>20)
	if maxRSS > 300<<20 || hwm > 300<<20 {
		t.Errorf("notifyd's resident memory reached %d MB (VmHWM %d MB) during the chained-print bombs, want under 300 MB", maxRSS>>20, hwm>>20)
	}
}
