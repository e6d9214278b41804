package schedule

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/sdk/wire"
)

// compiledSchedule is a configured schedule, parsed once at New.
type compiledSchedule struct {
	name    string
	cfg     config.Schedule
	cron    cron.Schedule
	loc     *time.Location
	content *template.Template // nil without content_key
	// contentMu guards budget: content_key is rendered by the evaluation
	// loop and by RunNow alike.
	contentMu sync.Mutex
	budget    *renderBudget // content's bounds: the payload templates' (render.go)
}

// maxContentKeyRender bounds a content_key's output as it renders, before
// checkContentKey holds it to config.MaxContentKeyLen; what its functions
// build is RenderMemoryFactor times this.
const maxContentKeyRender = 16 << 10

func compileSchedule(name string, s config.Schedule) (*compiledSchedule, error) {
	sched, err := config.ParseCron(s.Cron)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: invalid cron %q: %w", name, s.Cron, err)
	}
	tz := s.Timezone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := config.LoadZone(tz)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", name, err)
	}
	if spec, ok := sched.(*cron.SpecSchedule); ok {
		// A CRON_TZ= prefix names the zone in the spec itself and wins.
		if spec.Location != time.Local {
			loc, tz = spec.Location, spec.Location.String()
		}
		// next walks wall-clock time, which has no DST, in UTC.
		wall := *spec
		wall.Location = time.UTC
		sched = &wall
	}
	if _, err := newAudience(wire.Audience(s.Audience), s.Channel); err != nil {
		return nil, fmt.Errorf("schedule %q: %w", name, err)
	}
	if _, err := compilePayload(s.Payload); err != nil {
		return nil, fmt.Errorf("schedule %q: %w", name, err)
	}
	if s.Lead == 0 {
		s.Lead = config.DefaultScheduleLead
	}
	if s.Lead < 0 || s.Lead > config.MaxScheduleLead {
		return nil, fmt.Errorf("schedule %q: lead %s is not between 0 and %s (config.MaxScheduleLead)", name, s.Lead, config.MaxScheduleLead)
	}
	if s.MaxLate == 0 {
		s.MaxLate = config.DefaultScheduleMaxLate
	}
	s.Timezone = tz
	c := &compiledSchedule{name: name, cfg: s, cron: sched, loc: loc}
	if s.ContentKey != "" {
		// The payload templates' bounds: the same functions, steps, time
		// and memory. Without them a 30-byte {{range 100000000000}} spun
		// at start (New renders it once) and at every run.
		c.budget = &renderBudget{}
		t, err := template.New("content_key").Option("missingkey=error").Funcs(templateFuncs(c.budget)).Parse(s.ContentKey)
		if err == nil {
			err = boundCalls(t)
		}
		if err != nil {
			return nil, fmt.Errorf("schedule %q: content_key: %w", name, err)
		}
		boundRanges(t)
		c.content = t
		// Only .fire_time and .schedule exist: a template that fails on
		// one fire time fails on every one, so say so now.
		if _, err := c.contentKey(time.Date(2026, 1, 2, 8, 0, 0, 0, loc)); err != nil {
			return nil, fmt.Errorf("schedule %q: %w", name, err)
		}
	}
	return c, nil
}

// contentKey renders the schedule's content_key for a fire time; "" without
// one.
func (c *compiledSchedule) contentKey(fire time.Time) (string, error) {
	if c.content == nil {
		return "", nil
	}
	c.contentMu.Lock()
	defer c.contentMu.Unlock()
	b := c.budget
	b.reset(maxContentKeyRender)
	err := c.content.Execute(b, map[string]any{"fire_time": fire.In(c.loc), "schedule": c.name})
	if err == nil {
		err = b.err // a bound a range stopped at
	}
	if err != nil {
		return "", fmt.Errorf("content_key: %w", err)
	}
	return checkContentKey(b.out.String())
}

// checkContentKey bounds a rendered content key: non-empty, at most
// config.MaxContentKeyLen bytes, printable UTF-8 (it becomes part of every
// notification's idempotency key).
func checkContentKey(k string) (string, error) {
	switch {
	case strings.TrimSpace(k) == "":
		return "", fmt.Errorf("content_key renders empty")
	case len(k) > config.MaxContentKeyLen:
		return "", fmt.Errorf("content_key renders %d bytes, at most %d", len(k), config.MaxContentKeyLen)
	}
	if err := wire.CheckText(k); err != nil {
		return "", fmt.Errorf("content_key %w", err)
	}
	return k, nil
}

// maxCronGap is the longest a five-field cron may go between two fire
// times: 29 February, eight years apart across a century that is not a leap
// year (2096 to 2104), with a day to spare for the zone. robfig/cron looks
// five years ahead.
const maxCronGap = (8*366 + 1) * 24 * time.Hour

// prev is the latest fire time at or before t (zero if none within
// maxCronGap): the run an operator means by "the last one", and where the
// planner goes after a long outage. It looks back over windows doubling from
// a minute for one holding a fire time, then halves that window down to the
// nanosecond: about 80 calls of next, however many fire times the window
// holds (walking them, a cron like "* * * 1-6 *" on 31 December took 260,000).
func (c *compiledSchedule) prev(t time.Time) time.Time {
	for window := time.Minute; window < 2*maxCronGap; window *= 2 {
		lo := t.Add(-window)
		if f := c.next(lo); f.IsZero() || f.After(t) {
			continue
		}
		// A fire time lies in (lo, t], none in (hi, t].
		hi := t
		for hi.Sub(lo) > time.Nanosecond {
			mid := lo.Add(hi.Sub(lo) / 2)
			if f := c.next(mid); !f.IsZero() && !f.After(t) {
				lo = mid
			} else {
				hi = mid
			}
		}
		return c.next(lo)
	}
	return time.Time{}
}

// next is the first fire time strictly after t, in the schedule's zone.
//
// The cron fields are matched against wall-clock time, then mapped to the
// instant they name in the zone: a wall time skipped by a spring-forward
// (02:30 on a night that jumps from 02:00 to 03:00) fires at the end of the
// gap rather than not at all (robfig/cron alone skips that day), and a wall
// time that occurs twice in autumn fires once, at its first occurrence.
// @every schedules are real durations and bypass this.
func (c *compiledSchedule) next(t time.Time) time.Time {
	spec, ok := c.cron.(*cron.SpecSchedule)
	if !ok {
		return c.cron.Next(t.In(c.loc))
	}
	wall := wallClock(t.In(c.loc))
	// A mapped time can fall at or before t only around an autumn overlap,
	// when t is in the repeated hour's second occurrence: every wall time up
	// to the end of the overlap maps to its first occurrence, before t. Jump
	// past them at once (stepping through them one fire time at a time took
	// up to 60 steps for an every-minute cron).
	for range 8 {
		w := spec.Next(wall)
		if w.IsZero() && wall.Year() < 9000 {
			// robfig/cron looks through the fifth year after wall's; the
			// next 29 February may be in the eighth.
			w = spec.Next(time.Date(wall.Year()+6, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Nanosecond))
		}
		if wall = w; wall.IsZero() {
			return time.Time{}
		}
		r := instantOf(wall, c.loc)
		if r.After(t) {
			return r
		}
		if _, end := r.ZoneBounds(); !end.IsZero() && !end.After(t) {
			// The wall clock at the end of r's zone period, read in r's
			// offset: no wall time before it maps after t.
			_, off := r.Zone()
			if w := wallClock(end.In(time.FixedZone("", off))).Add(-time.Nanosecond); w.After(wall) {
				wall = w
			}
		}
	}
	return time.Time{}
}

// wallClock is t's local date and time as a UTC time: a clock without DST.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instantOf maps a wall-clock time (UTC fields) to the instant it names in
// loc: the first of two for an autumn overlap, the end of the gap for a
// spring-forward.
func instantOf(wall time.Time, loc *time.Location) time.Time {
	a := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), loc)
	got := wallClock(a)
	if got.Equal(wall) {
		// An earlier instant with the same wall time lies in the previous
		// zone (time.Date does not promise which of the two it returns).
		if start, _ := a.ZoneBounds(); !start.IsZero() {
			_, off := start.Add(-time.Nanosecond).Zone()
			if e := wall.Add(-time.Duration(off) * time.Second).In(loc); e.Before(a) && wallClock(e).Equal(wall) {
				return e
			}
		}
		return a
	}
	// The wall time does not exist: fire at the transition that skipped it.
	start, end := a.ZoneBounds()
	if got.Before(wall) {
		return end.In(loc)
	}
	return start.In(loc)
}

// plannedRun is a run evaluation decided to record.
type plannedRun struct {
	fire    time.Time
	skipped bool
	late    time.Duration // how late a missed fire time was found
	before  missedBefore  // the missed fire times passed over before it
}

// missedBefore counts the fire times missed before the latest missed one:
// n of them from the first, or at least n when there were more than
// maxMissedWalk to count.
type missedBefore struct {
	n       int
	atLeast bool
	first   time.Time
}

func (m missedBefore) String() string {
	if m.n == 0 {
		return ""
	}
	more := ""
	if m.atLeast {
		more = "at least "
	}
	return fmt.Sprintf("%s%d earlier fire times from %s", more, m.n, m.first.UTC().Format(time.RFC3339))
}

// maxMissedWalk bounds the fire times the planner walks one at a time after
// an outage (about 2 µs each for a five-field cron: 0.2 s at most, once):
// past it the latest missed one is found from now (prev) and the ones
// before it are counted as "at least". A schedule first seen in 1970 (a
// machine whose clock was not set) walked a million a tick, for every tick
// until it caught up.
const maxMissedWalk = 100_000

// lastMissed is the latest fire time at or before now, from first (a fire
// time at or before now), and the count of those before it.
func (c *compiledSchedule) lastMissed(first, now time.Time) (time.Time, missedBefore) {
	before := missedBefore{first: first}
	if every, ok := c.cron.(cron.ConstantDelaySchedule); ok {
		// Whole seconds apart from first (ParseCron): counted, not walked.
		step := int64(every.Delay / time.Second)
		k := (now.Unix() - first.Unix()) / step
		before.n = int(k)
		return time.Unix(first.Unix()+k*step, 0).In(c.loc), before
	}
	last := first
	for next := c.next(last); !next.IsZero() && !next.After(now); next = c.next(last) {
		if before.n == maxMissedWalk {
			// Fire times are never further apart than maxCronGap, which
			// prev looks through: it finds one after last.
			if p := c.prev(now); p.After(last) {
				last = p
			}
			before.atLeast = true
			break
		}
		last = next
		before.n++
	}
	return last, before
}

// plan decides which runs to create at now, given the last fire time already
// recorded (or when the schedule was first seen). Fire times whose lead has
// begun and which are still ahead become runs. Of the fire times already
// past — missed while every instance was down — only the latest counts: it
// runs if it is at most max_late old, else it is recorded as SKIPPED; older
// ones are passed over (counted in its before, for the log and the SKIPPED
// run's reason). The work is bounded however long ago since is
// (maxMissedWalk), and no run is created for a fire time before the latest
// missed one.
func (c *compiledSchedule) plan(since, now time.Time) (runs []plannedRun, passedOver missedBefore) {
	fire := c.next(since)
	if !fire.IsZero() && !fire.After(now) {
		missed, before := c.lastMissed(fire, now)
		late := now.Sub(missed)
		runs = append(runs, plannedRun{fire: missed, skipped: late > c.cfg.MaxLate, late: late, before: before})
		passedOver = before
		fire = c.next(missed)
	}
	if !fire.IsZero() && fire.After(now) && !fire.Add(-c.cfg.Lead).After(now) && c.aheadOf(now, fire) < MaxRunsAhead {
		runs = append(runs, plannedRun{fire: fire})
	}
	return runs, passedOver
}

// MaxRunsAhead bounds the runs of a schedule waiting ahead of now, each
// its whole audience materialised PENDING: a run is created lead before its
// fire time, one a tick, so a long lead on a frequent cron (24h, every
// minute) made 1,440. Past it the next run is created as the first of them
// fires: later than lead before its fire time, never after it.
const MaxRunsAhead = 10

// aheadOf counts the fire times after now and before fire (those whose runs
// wait ahead of it), up to MaxRunsAhead.
func (c *compiledSchedule) aheadOf(now, fire time.Time) int {
	n := 0
	for f := c.next(now); !f.IsZero() && f.Before(fire) && n < MaxRunsAhead; f = c.next(f) {
		n++
	}
	return n
}

// evaluate creates the runs that are due at now for every configured
// schedule. Any number of instances may do this at once: (schedule,
// fire_time) is unique, so each run is created once.
func (s *Service) evaluate(ctx context.Context, now time.Time) error {
	if len(s.schedules) == 0 {
		return nil
	}
	names := make([]string, 0, len(s.schedules))
	for name := range s.schedules {
		names = append(names, name)
	}
	sort.Strings(names)
	// This instance creates a run at most lead before its fire time, so a
	// time recorded past now + lead (a minute's slack for the clocks of
	// instances) came from a clock ahead of ours — another instance's that
	// read 2030 for a moment — or from SQL: taken for the last fire time, it
	// stopped the schedule on every instance until then. Such times, and
	// times that are not finite (which no time.Time holds), are passed over.
	horizons := make([]time.Time, len(names))
	for i, name := range names {
		horizons[i] = now.Add(s.schedules[name].cfg.Lead + time.Minute)
	}
	// First sight of each schedule and its latest recorded run, in one
	// statement for all schedules.
	rows, err := s.pool.Query(ctx, `
		WITH seen AS (
			INSERT INTO schedules (name, first_seen_at) SELECT unnest($1::text[]), $2
			ON CONFLICT (name) DO NOTHING)
		SELECT n, greatest(
			(SELECT first_seen_at FROM schedules WHERE name = n AND isfinite(first_seen_at) AND first_seen_at <= h),
			(SELECT max(fire_time) FROM jobs WHERE schedule = n AND isfinite(fire_time) AND fire_time <= h))
		FROM unnest($1::text[], $3::timestamptz[]) AS u(n, h)`, names, now, horizons)
	if err != nil {
		return fmt.Errorf("evaluate schedules: %w", err)
	}
	since := map[string]time.Time{}
	for rows.Next() {
		var (
			name string
			t    *time.Time
		)
		if err := rows.Scan(&name, &t); err != nil {
			rows.Close()
			return fmt.Errorf("evaluate schedules: %w", err)
		}
		if t == nil {
			// Inserted just now by this statement (its own insert is not
			// visible to its subqueries): first seen at now.
			since[name] = now
		} else {
			since[name] = *t
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("evaluate schedules: %w", err)
	}
	for _, name := range names {
		c := s.schedules[name]
		runs, passedOver := c.plan(since[name], now)
		if passedOver.n > 0 {
			s.log.Warn("fire times missed while no instance ran were passed over", "schedule", name, "missed", passedOver.String())
		}
		for _, r := range runs {
			if err := s.createRun(ctx, c, r, now); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Service) createRun(ctx context.Context, c *compiledSchedule, r plannedRun, now time.Time) error {
	n := newJob{
		kind: KindSchedule, schedule: c.name, timezone: c.cfg.Timezone, channel: c.cfg.Channel,
		fireTime: r.fire, audience: c.cfg.Audience, payload: c.cfg.Payload, state: jobPending, now: now,
	}
	key, err := c.contentKey(r.fire)
	if err != nil {
		// compileSchedule rendered it once; a fire time it cannot name
		// still gets its run, under the fire time's own keys.
		s.log.Warn("content_key could not be rendered; the run uses the fire time's keys", "schedule", c.name, "error", err)
	}
	n.contentKey = key
	if r.skipped {
		n.state = jobSkipped
		n.lastError = fmt.Sprintf("missed by %s while no instance ran, more than max_late %s", r.late.Round(time.Second), c.cfg.MaxLate)
		if r.before.n > 0 {
			n.lastError += "; " + r.before.String() + " were missed before it and are not run"
		}
	}
	job, created, err := jobInsert(ctx, s.pool, n)
	if err != nil {
		return fmt.Errorf("schedule %q: create run at %s: %w", c.name, r.fire.Format(time.RFC3339), err)
	}
	if created {
		s.log.Info("schedule run created", "schedule", c.name, "fire_time", r.fire.Format(time.RFC3339),
			"job", job.ID, "state", job.State)
	}
	return nil
}
