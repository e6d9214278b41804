package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/notifyd/notifyd/config"
)

func mustCompile(t *testing.T, cron, tz string, lead, maxLate time.Duration) *compiledSchedule {
	t.Helper()
	c, err := compileSchedule("daily-quiz", config.Schedule{
		Channel: "quiz", Cron: cron, Timezone: tz, Lead: lead, MaxLate: maxLate,
		Audience: config.Audience{Topic: "daily-quiz"}, Payload: map[string]any{"text": "hi"},
	})
	if err != nil {
		t.Fatalf("compileSchedule: %v", err)
	}
	return c
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestCompiledSchedule_Next(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cron, tz, after, want string
	}{
		// 08:00 New York is 13:00Z in winter (EST) and 12:00Z after the
		// spring-forward on 2024-03-10, back to 13:00Z after 2024-11-03.
		{"new york before spring forward", "0 8 * * *", "America/New_York", "2024-03-08T13:00:00Z", "2024-03-09T13:00:00Z"},
		{"new york across spring forward", "0 8 * * *", "America/New_York", "2024-03-09T13:00:00Z", "2024-03-10T12:00:00Z"},
		{"new york across fall back", "0 8 * * *", "America/New_York", "2024-11-02T12:00:00Z", "2024-11-03T13:00:00Z"},
		// Berlin: 08:00 CET is 07:00Z, CEST (from 2024-03-31) 06:00Z.
		{"berlin across spring forward", "0 8 * * *", "Europe/Berlin", "2024-03-30T07:00:00Z", "2024-03-31T06:00:00Z"},
		{"berlin across fall back", "0 8 * * *", "Europe/Berlin", "2024-10-26T06:00:00Z", "2024-10-27T07:00:00Z"},
		{"seoul has no DST", "0 8 * * *", "Asia/Seoul", "2024-03-09T23:00:00Z", "2024-03-10T23:00:00Z"},
		// 02:30 does not exist in New York on 2024-03-10: it fires when the
		// gap ends, 03:00 EDT (07:00Z), not a day later.
		{"new york time in the gap", "30 2 * * *", "America/New_York", "2024-03-09T07:30:00Z", "2024-03-10T07:00:00Z"},
		{"new york after the gap", "30 2 * * *", "America/New_York", "2024-03-10T07:00:00Z", "2024-03-11T06:30:00Z"},
		{"berlin time in the gap", "30 2 * * *", "Europe/Berlin", "2024-03-30T01:30:00Z", "2024-03-31T01:00:00Z"},
		// 01:30 happens twice in New York on 2024-11-03: it fires once, at
		// the first (EDT, 05:30Z), and next at 01:30 EST the day after.
		{"new york overlap fires first occurrence", "30 1 * * *", "America/New_York", "2024-11-02T05:30:00Z", "2024-11-03T05:30:00Z"},
		{"new york overlap fires once", "30 1 * * *", "America/New_York", "2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"},
		{"berlin overlap fires first occurrence", "30 2 * * *", "Europe/Berlin", "2024-10-26T00:30:00Z", "2024-10-27T00:30:00Z"},
		{"berlin overlap fires once", "30 2 * * *", "Europe/Berlin", "2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"},
		{"hourly across spring forward", "0 * * * *", "America/New_York", "2024-03-10T06:00:00Z", "2024-03-10T07:00:00Z"},
		{"hourly after spring forward", "0 * * * *", "America/New_York", "2024-03-10T07:00:00Z", "2024-03-10T08:00:00Z"},
		// From inside the repeated hour's second occurrence (01:10 EST,
		// 06:10Z; a schedule first seen then, or an operator's run now):
		// every wall time to 02:00 maps to its first occurrence, before t.
		// Before, next gave up after 8 steps and returned no fire time, so
		// plan created nothing, the schedule's last fire time never moved,
		// and it never fired again.
		{"every five minutes from the overlap's second hour", "*/5 * * * *", "America/New_York", "2024-11-03T06:10:00Z", "2024-11-03T07:00:00Z"},
		{"every minute from the overlap's second hour", "* * * * *", "America/New_York", "2024-11-03T06:00:30Z", "2024-11-03T07:00:00Z"},
		{"every minute after the overlap", "* * * * *", "America/New_York", "2024-11-03T07:00:00Z", "2024-11-03T07:01:00Z"},
		// Lord Howe falls back half an hour: 02:00 +11 to 01:30 +10:30.
		{"half-hour overlap, second occurrence", "* * * * *", "Australia/Lord_Howe", "2024-04-06T15:01:00Z", "2024-04-06T15:30:00Z"},
		{"leap day is still a date", "0 0 29 2 *", "UTC", "2025-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		// 2100 is no leap year: eight years from one 29 February to the
		// next, past robfig/cron's five, which returned no fire time: the
		// schedule never fired again, and said nothing.
		{"leap day across 2100", "0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},
		{"leap day across 2100, Seoul", "0 9 29 2 *", "Asia/Seoul", "2097-06-01T00:00:00Z", "2104-02-29T00:00:00Z"},
		{"every whole seconds", "@every 20s", "UTC", "2025-03-01T00:00:00Z", "2025-03-01T00:00:20Z"},
		{"cron_tz prefix wins", "CRON_TZ=Asia/Seoul 0 8 * * *", "UTC", "2024-03-09T23:00:00Z", "2024-03-10T23:00:00Z"},
		{"every is a real duration", "@every 90m", "America/New_York", "2024-03-10T06:30:00Z", "2024-03-10T08:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, tt.cron, tt.tz, 10*time.Minute, time.Hour)
			got := c.next(utc(tt.after))
			if !got.Equal(utc(tt.want)) {
				t.Errorf("next(%s) = %s (%s), want %s", tt.after, got.UTC().Format(time.RFC3339), got, tt.want)
			}
		})
	}
}

// TestCompiledSchedule_Prev: "run the last fire time" finds it however
// far back the cron's longest gap puts it. It looked back about a year, so
// for a leap-day schedule it answered "it has no fire time at or before
// now" three years in four.
func TestCompiledSchedule_Prev(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ cron, at, want string }{
		{"0 0 29 2 *", "2026-06-01T00:00:00Z", "2024-02-29T00:00:00Z"},
		{"0 0 29 2 *", "2104-02-28T00:00:00Z", "2096-02-29T00:00:00Z"},
		{"0 8 * * *", "2026-06-01T07:00:00Z", "2026-05-31T08:00:00Z"},
		{"0 0 1 1 *", "2026-06-01T00:00:00Z", "2026-01-01T00:00:00Z"},
		// Every minute of six months, asked on 31 December: the window
		// holding a fire time holds 260,000 of them, which prev walked.
		{"* * * 1-6 *", "2026-12-31T12:00:00Z", "2026-06-30T23:59:00Z"},
		{"* * * * *", "2026-06-01T00:00:00Z", "2026-06-01T00:00:00Z"},
		{"@every 20s", "2026-06-01T00:00:00Z", "2026-06-01T00:00:00Z"},
	} {
		c := mustCompile(t, tt.cron, "UTC", 10*time.Minute, time.Hour)
		if got := c.prev(utc(tt.at)); !got.Equal(utc(tt.want)) {
			t.Errorf("%s: prev(%s) = %s, want %s", tt.cron, tt.at, got.UTC().Format(time.RFC3339), tt.want)
		}
	}
}

func TestCompiledSchedule_Plan(t *testing.T) {
	t.Parallel()
	ny := mustCompile(t, "0 8 * * *", "America/New_York", 10*time.Minute, time.Hour)
	// The last run fired 2024-03-09 08:00 EST; the next is 2024-03-10 08:00
	// EDT = 12:00Z, whose lead starts at 11:50Z.
	since := utc("2024-03-09T13:00:00Z")
	tests := []struct {
		name      string
		now       string
		want      []plannedRun
		passedOvr int
	}{
		{"before the lead", "2024-03-10T11:49:59Z", nil, 0},
		{"lead begins (DST day, an hour earlier in UTC)", "2024-03-10T11:50:00Z", []plannedRun{{fire: utc("2024-03-10T12:00:00Z")}}, 0},
		{"inside the lead", "2024-03-10T11:59:59Z", []plannedRun{{fire: utc("2024-03-10T12:00:00Z")}}, 0},
		{"missed, within max_late", "2024-03-10T12:30:00Z", []plannedRun{{fire: utc("2024-03-10T12:00:00Z"), late: 30 * time.Minute}}, 0},
		{"missed, exactly max_late", "2024-03-10T13:00:00Z", []plannedRun{{fire: utc("2024-03-10T12:00:00Z"), late: time.Hour}}, 0},
		{"missed, over max_late", "2024-03-10T13:00:01Z", []plannedRun{{fire: utc("2024-03-10T12:00:00Z"), skipped: true, late: time.Hour + time.Second}}, 0},
		{"down three days: latest missed only", "2024-03-12T12:05:00Z", []plannedRun{{fire: utc("2024-03-12T12:00:00Z"), late: 5 * time.Minute}}, 2},
		{"missed and the next within its lead", "2024-03-11T11:55:00Z",
			[]plannedRun{{fire: utc("2024-03-10T12:00:00Z"), skipped: true, late: 23*time.Hour + 55*time.Minute}, {fire: utc("2024-03-11T12:00:00Z")}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, passed := ny.plan(since, utc(tt.now))
			if len(got) != len(tt.want) {
				t.Fatalf("plan at %s = %+v, want %+v", tt.now, got, tt.want)
			}
			for i := range got {
				if !got[i].fire.Equal(tt.want[i].fire) || got[i].skipped != tt.want[i].skipped || got[i].late != tt.want[i].late {
					t.Errorf("plan at %s run %d = %+v, want %+v", tt.now, i, got[i], tt.want[i])
				}
			}
			if passed.n != tt.passedOvr || passed.atLeast {
				t.Errorf("passed over %+v, want %d fire times", passed, tt.passedOvr)
			}
		})
	}
}

// TestCompiledSchedule_PrevAcrossDST: the last fire time is one next
// would give: a wall time that occurs twice fired at its first occurrence,
// so none lies in the repeated hour's second one.
func TestCompiledSchedule_PrevAcrossDST(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ cron, at, want string }{
		{"30 1 * * *", "2024-11-03T07:00:00Z", "2024-11-03T05:30:00Z"},
		{"* * * * *", "2024-11-03T06:10:00Z", "2024-11-03T05:59:00Z"},
		{"30 2 * * *", "2024-03-10T08:00:00Z", "2024-03-10T07:00:00Z"}, // in the spring gap: its end
	} {
		c := mustCompile(t, tt.cron, "America/New_York", 10*time.Minute, time.Hour)
		if got := c.prev(utc(tt.at)); !got.Equal(utc(tt.want)) {
			t.Errorf("%s: prev(%s) = %s, want %s", tt.cron, tt.at, got.UTC().Format(time.RFC3339), tt.want)
		}
	}
}

// TestCompiledSchedule_Plan_sinceLongAgo: from a first sight in 1970 the
// planner goes to the latest missed fire time in one tick (it walked a
// million a tick and created a run for 1971), counting what it passed over
// as far as maxMissedWalk.
func TestCompiledSchedule_Plan_sinceLongAgo(t *testing.T) {
	t.Parallel()
	now := utc("2024-03-01T12:00:30Z")
	for _, tt := range []struct {
		cron    string
		want    []plannedRun
		before  int
		atLeast bool
	}{
		{"* * * * *", []plannedRun{{fire: utc("2024-03-01T12:00:00Z"), late: 30 * time.Second}, {fire: utc("2024-03-01T12:01:00Z")}}, maxMissedWalk, true},
		{"0 8 * * *", []plannedRun{{fire: utc("2024-03-01T08:00:00Z"), skipped: true, late: 4*time.Hour + 30*time.Second}}, 19783, false},
		{"@every 1s", []plannedRun{{fire: now}, {fire: now.Add(time.Second)}}, 1709294429, false},
	} {
		c := mustCompile(t, tt.cron, "UTC", 10*time.Minute, time.Hour)
		got, before := c.plan(utc("1970-01-01T00:00:00Z"), now)
		if len(got) != len(tt.want) {
			t.Fatalf("%s: plan = %+v, want %+v", tt.cron, got, tt.want)
		}
		for i := range got {
			if !got[i].fire.Equal(tt.want[i].fire) || got[i].skipped != tt.want[i].skipped || got[i].late != tt.want[i].late {
				t.Errorf("%s: run %d = %+v, want %+v", tt.cron, i, got[i], tt.want[i])
			}
		}
		if before.n != tt.before || before.atLeast != tt.atLeast {
			t.Errorf("%s: passed over %+v, want %d (at least: %v)", tt.cron, before, tt.before, tt.atLeast)
		}
	}
}

func TestNew_badSchedule(t *testing.T) {
	t.Parallel()
	base := func() config.Schedule {
		return config.Schedule{Channel: "quiz", Cron: "0 8 * * *", Timezone: "Asia/Seoul",
			Audience: config.Audience{Topic: "t"}, Payload: map[string]any{"text": "x"}}
	}
	tests := []struct {
		name   string
		mutate func(*config.Schedule)
		want   string
	}{
		{"invalid cron", func(s *config.Schedule) { s.Cron = "0 25 * * *" }, `schedule "morning": invalid cron "0 25 * * *"`},
		// Before, these started: a day no month has never fired (silently),
		// and robfig/cron ran an @every under a second, zero or negative
		// every second, and rounded 1500ms down to 1s.
		{"a cron that never fires", func(s *config.Schedule) { s.Cron = "0 0 31 2 *" }, `schedule "morning": invalid cron "0 0 31 2 *": matches no date`},
		{"every 1ns", func(s *config.Schedule) { s.Cron = "@every 1ns" }, `invalid cron "@every 1ns": @every needs a whole number of seconds, at least 1s`},
		{"every negative", func(s *config.Schedule) { s.Cron = "@every -1h" }, `invalid cron "@every -1h": @every needs`},
		{"every part of a second", func(s *config.Schedule) { s.Cron = "CRON_TZ=Asia/Seoul @every 1500ms" }, `@every needs a whole number of seconds`},
		{"unknown time zone", func(s *config.Schedule) { s.Timezone = "Mars/Olympus" }, `schedule "morning": unknown time zone "Mars/Olympus"`},
		// Each machine's own zone: instances in different zones fired at
		// different instants, each creating its run.
		{"the machine's own zone", func(s *config.Schedule) { s.Timezone = "Local" }, `schedule "morning": "Local" is each machine's own time zone`},
		{"the machine's own zone in the cron", func(s *config.Schedule) { s.Cron = "CRON_TZ=Local 0 8 * * *" }, `invalid cron "CRON_TZ=Local 0 8 * * *": CRON_TZ: "Local" is each machine's own time zone`},
		// robfig/cron panicked slicing at a space that is not there.
		{"a zone and no schedule", func(s *config.Schedule) { s.Cron = "CRON_TZ=UTC" }, `invalid cron "CRON_TZ=UTC": CRON_TZ= names a zone but no schedule follows it`},
		{"lead past a day", func(s *config.Schedule) { s.Lead = 100000 * time.Hour }, `schedule "morning": lead 100000h0m0s is not between 0 and 24h0m0s`},
		{"no audience", func(s *config.Schedule) { s.Audience = config.Audience{} }, `schedule "morning": audience: give exactly one of topic or query`},
		{"query without key", func(s *config.Schedule) { s.Audience = config.Audience{Query: "SELECT 1"} }, `schedule "morning": audience.key is required`},
		{"bad template", func(s *config.Schedule) { s.Payload = map[string]any{"a": []any{"{{.data.x"}} }, `schedule "morning": payload a[0]`},
		{"empty payload", func(s *config.Schedule) { s.Payload = nil }, `schedule "morning": payload is empty`},
		// Before, a template was held to 64 KiB as written only: these
		// started, and each run's job then read back far past the bound.
		{"a number past 100 characters", func(s *config.Schedule) { s.Payload = map[string]any{"text": "x", "n": 1e300} },
			`schedule "morning": payload has a number at $.n`},
		{"a template reading back past its bound", func(s *config.Schedule) { s.Payload = map[string]any{"a": manyNumbers(9_000, 1e99)} },
			`schedule "morning": payload template reads back as`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.mutate(&s)
			cfg := config.Default()
			cfg.Schedules = map[string]config.Schedule{"morning": s}
			_, err := New(lazyPool(t), &cfg, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestConfigLoad_badSchedule(t *testing.T) {
	t.Parallel()
	// The config layer rejects these before the service sees them; the key
	// named is the schedule's.
	tests := []struct{ name, field, want string }{
		{"invalid cron", `cron: "61 * * * *"`, `schedules.morning.cron`},
		{"unknown time zone", "cron: \"0 8 * * *\"\n    timezone: Nowhere/Land", `schedules.morning.timezone`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, `
postgres: {url: "postgres://127.0.0.1:5432/x"}
redis: {url: "redis://127.0.0.1:6379/0"}
channels: {quiz: {plugin: webhook}}
schedules:
  morning:
    channel: quiz
    `+tt.field+`
    audience: {topic: t}
    payload: {text: hi}
`)
			_, err := config.Load(path, []string{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("config.Load error = %v, want it to name %q", err, tt.want)
			}
		})
	}
}

// manyNumbers is n copies of v: a template short as written that reads back
// long (1e99 is 100 digits once Postgres prints it).
func manyNumbers(n int, v any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}
