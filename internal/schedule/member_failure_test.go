package schedule

import (
	"github.com/notifyd/notifyd/config"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/notifyd/notifyd/sdk/wire"
)

// TestService_failedReasonStorable: a member's render error quoting a
// value the template made (a NUL from "\x00", an invalid UTF-8 byte from
// slicing a Hangul syllable) is a reason Postgres cannot store. The FAILED
// row's insert then failed the chunk, isolateBadRows found no PENDING row
// at fault, and the job was handed back PENDING to fail the same way on
// every claim, for ever. Each member must end FAILED with a storable reason
// and the job DONE.
func TestService_failedReasonStorable(t *testing.T) {
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

// TestService_oneFailureFailsOnlyItsMember: a template that does not
// read .data (so no member's data is decoded) failing for one member made
// every later member of its chunk FAILED too, with that member's reason: the
// chunk reader tested the render's error again for each of them. Only the
// member at fault may fail.
func TestService_oneFailureFailsOnlyItsMember(t *testing.T) {
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

// TestService_clockEveryStep: a step's body can cost tens of
// milliseconds without calling a function that reads the clock: eq compares
// its first argument with each of the others, and a 64 KiB template holds
// 21,000 of them, each a 60 KiB string (an audience query's data reads back
// within 128 KiB). Read every 256 steps, the clock let such a render run
// about 10 s past its 1 s bound, per recipient; read every step, it stops
// one step after the bound. Not parallel: it measures wall time, with a
// margin of seconds for a busy machine.
func TestService_clockEveryStep(t *testing.T) {
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

// seedBigAttributes gives each of topic's subscribers sub-1…sub-n an
// attribute s of size bytes (within the 64 KiB attributes bound).
func seedBigAttributes(t *testing.T, b *testBundle, topic string, n, size int) {
	t.Helper()
	seedTopic(t, b.ctx, b.db.Pool, topic, "hooks", n, 0)
	if _, err := b.db.Pool.Exec(b.ctx, `UPDATE subscribers SET attributes = jsonb_build_object('s', repeat('a', $1::int) || external_id)`, size); err != nil {
		t.Fatal(err)
	}
}

// auditChunkBytes is the test's bound of what one chunk holds: generous
// (16 MiB the bound, a member's payload or data past it at most 1 MiB).
const auditChunkBytes = 20 << 20

// TestService_chunkRenderedBytes: every member's payload is within the
// payload bound, but a chunk held all of its members' payloads at once,
// rendered into one buffer and copied into one string: 200 members of 240
// KB were 48 MB a chunk (1,000 at the default chunk size 240 MB, several
// times that with the buffer's doubling and the read-ahead chunk; 10,000,
// the largest chunk_size, 2.4 GB). A chunk stops at a byte bound, at a
// member's end; the rest follow in the next chunks, none lost.
func TestService_chunkRenderedBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const members, size = 200, 60_000
	seedBigAttributes(t, b, "news", members, size)
	s := b.service(t, "a")
	var worst int
	var prev int
	s.afterChunk = func(job int64, n int) error {
		var done, bytes int
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*), coalesce(sum(octet_length(payload::text)), 0) FROM notifications WHERE job_id = $1`, job).Scan(&done, &bytes); err != nil {
			return err
		}
		worst = max(worst, bytes-prev)
		prev = bytes
		return nil
	}
	job := b.runCampaign(t, s, wire.Audience{Topic: "news"}, map[string]any{"x": `{{.data.s}}{{.data.s}}{{.data.s}}{{.data.s}}`}, 0)
	if n := b.pendingCount(t, job.ID); n != members {
		t.Errorf("%d PENDING, want %d", n, members)
	}
	if got := diffSets(jobRecipients(t, b.ctx, b.db.Pool, job.ID), expectedRecipients(members, 0)); got != "" {
		t.Errorf("recipients: %s", got)
	}
	if worst > auditChunkBytes {
		t.Errorf("one chunk held %d MiB of payloads, want at most %d MiB", worst>>20, auditChunkBytes>>20)
	}
}

// TestService_chunkReadBytes: a chunk read every member's data (each
// within 128 KiB as it reads back) before rendering any: 600 members of 60
// KB were 36 MB read, and copied once more for the decoder (at
// chunk_size 10,000, 1.2 GB). A page stops at a byte bound, at a member's
// end, and the next page goes on from it: every member read once.
func TestService_chunkReadBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const members, size = 600, 60_000
	seedBigAttributes(t, b, "news", members, size)
	aud := topicAudience{topic: "news", channel: "hooks"}
	cursor, seen := "", map[string]int{}
	for pages := 0; ; pages++ {
		if pages > members {
			t.Fatalf("%d pages and not at the end", pages)
		}
		c, err := aud.fetch(b.ctx, b.db.Pool, cursor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, r := range c.rows {
			held += len(r.data) + len(r.recipient)
			seen[r.recipient]++
		}
		if held > auditChunkBytes {
			t.Errorf("page %d read %d MiB (%d members), want at most %d MiB", pages, held>>20, len(c.rows), auditChunkBytes>>20)
		}
		if len(c.rows) == 0 {
			break
		}
		cursor = c.lastKey
	}
	if len(seen) != members {
		t.Errorf("read %d distinct members, want %d", len(seen), members)
	}
	for r, n := range seen {
		if n != 1 {
			t.Errorf("%s read %d times", r, n)
		}
	}
}

// TestService_contentKeyBounded: a schedule's content_key is a
// template of at most 200 bytes, but it ran without any of the payload's
// bounds, at start (New renders it once) and at every run: a range over
// 10^11 spun for good (New never returned, serve never started). It
// is held to the payload templates' bounds: New fails naming the bound.
func TestService_contentKeyBounded(t *testing.T) {
	t.Parallel()
	for name, key := range map[string]string{
		"a range over 10^11": `{{range 100000000000}}{{end}}x`,
		"output past 200":    `{{range 1000000}}ab{{end}}`,
		"a call":             `{{call .schedule}}`,
		"recursion":          `{{define "a"}}{{template "a" .}}{{end}}{{template "a" .}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.Schedules = map[string]config.Schedule{"morning": {Channel: "quiz", Cron: "0 8 * * *", Timezone: "Asia/Seoul",
				Audience: config.Audience{Topic: "t"}, Payload: map[string]any{"text": "x"}, ContentKey: key}}
			done := make(chan error, 1)
			go func() {
				_, err := New(lazyPool(t), &cfg, Options{})
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), `schedule "morning": content_key`) {
					t.Errorf("New error = %v, want content_key refused", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("New still rendering content_key %s after 60 s", key)
			}
		})
	}
}
