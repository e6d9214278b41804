package schedule

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/notifyd/notifyd/sdk/wire"
)

// TestProbeAuditB_failedReasonStorable: a member's render error quoting a
// value the template made (a NUL from "\x00", an invalid UTF-8 byte from
// slicing a Hangul syllable) is a reason Postgres cannot store. The FAILED
// row's insert then failed the chunk, isolateBadRows found no PENDING row
// at fault, and the job was handed back PENDING to fail the same way on
// every claim, for ever. Each member must end FAILED with a storable reason
// and the job DONE.
func TestProbeAuditB_failedReasonStorable(t *testing.T) {
	t.Parallel()
	for name, bad := range map[string]string{
		"NUL":             `{{range "a\x00b"}}{{end}}`,
		"invalid UTF-8":   `{{range (slice "한" 0 1)}}{{end}}`,
		"both, as printf": `{{range (printf "%s\x00" (slice "한" 0 2))}}{{end}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", 3, 0)
			s := b.service(t, "a")
			job, err := s.CreateCampaign(b.ctx, wire.Campaign{Channel: "hooks", Audience: wire.Audience{Topic: "news"},
				Payload: map[string]any{"x": `{{if eq .recipient "addr-2"}}` + bad + `{{end}}ok`}})
			if err != nil {
				t.Fatal(err)
			}
			// A job handed back runs again on the next RunOnce: a few rounds
			// show whether it ever finishes.
			for range 3 {
				if err := s.RunOnce(b.ctx); err != nil {
					t.Logf("RunOnce: %v", err)
				}
			}
			j := mustGetJob(t, b.ctx, s, job.ID)
			if j.State != jobDone || j.Failed != 1 {
				t.Fatalf("job = %s, want DONE with 1 failed (%v)", jobLine(j), b.failedReasons(t, job.ID))
			}
			reason := b.failedReasons(t, job.ID)["addr-2"]
			if !strings.Contains(reason, "range can't iterate") || strings.IndexByte(reason, 0) >= 0 || !utf8.ValidString(reason) {
				t.Errorf("addr-2 FAILED with %q, want the range's error as storable text", reason)
			}
			if n := b.pendingCount(t, job.ID); n != 2 {
				t.Errorf("%d PENDING, want the other 2", n)
			}
		})
	}
}

// TestProbeAuditB_oneFailureFailsOnlyItsMember: a template that does not
// read .data (so no member's data is decoded) failing for one member made
// every later member of its chunk FAILED too, with that member's reason: the
// chunk reader tested the render's error again for each of them. Only the
// member at fault may fail.
func TestProbeAuditB_oneFailureFailsOnlyItsMember(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedTopic(t, b.ctx, b.db.Pool, "news", "hooks", 6, 0)
	s := b.service(t, "a")
	job := b.runCampaign(t, s, wire.Audience{Topic: "news"},
		map[string]any{"x": `hi {{.recipient}}{{if eq .recipient "addr-2"}}{{index .recipient 7}}{{end}}`}, 1)
	reasons := b.failedReasons(t, job.ID)
	if len(reasons) != 1 || !strings.Contains(reasons["addr-2"], "index") {
		t.Errorf("FAILED: %v; want addr-2 alone, with its own reason", reasons)
	}
	if n := b.pendingCount(t, job.ID); n != 5 {
		t.Errorf("%d PENDING, want the other 5", n)
	}
}

// TestProbeAuditB_clockEveryStep: a step's body can cost tens of
// milliseconds without calling a function that reads the clock: eq compares
// its first argument with each of the others, and a 64 KiB template holds
// 21,000 of them, each a 60 KiB string (an audience query's data reads back
// within 128 KiB). Read every 256 steps, the clock let such a render run
// about 10 s past its 1 s bound, per recipient; read every step, it stops
// one step after the bound. Not parallel: it measures wall time, with a
// margin of seconds for a busy machine.
func TestProbeAuditB_clockEveryStep(t *testing.T) {
	long := strings.Repeat("a", 60_000)
	data := `{"a":"` + long + `x","b":"` + long + `y"}`
	var tmpl strings.Builder
	tmpl.WriteString(`{{$a := .data.a}}{{$b := .data.b}}{{range 1000}}{{if eq $a`)
	for tmpl.Len() < MaxTemplateBytes-100 {
		tmpl.WriteString(` $b`)
	}
	tmpl.WriteString(`}}{{end}}{{end}}`)
	start := time.Now()
	out, err := renderOne(t, map[string]any{"t": tmpl.String()}, "r", data)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "rendering took more than") {
		t.Fatalf("render = %.100s, %v; want the time bound", out, err)
	}
	if took > 4*maxRenderTime {
		t.Errorf("the render stopped after %s, want about %s (one step past the bound)", took.Round(time.Millisecond), maxRenderTime)
	}
}
