package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Schedules lists the configured schedules, by name, each with its next fire
// time and latest run.
func (s *Service) Schedules(ctx context.Context) ([]wire.Schedule, error) {
	now := s.now()
	names := s.scheduleNames()
	last := map[string]*jobRow{}
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT ON (schedule) `+jobColumns+` FROM jobs
		WHERE schedule = ANY($1) ORDER BY schedule, fire_time DESC`, names)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		last[j.Schedule] = j
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out := make([]wire.Schedule, 0, len(names))
	for _, n := range names {
		c := s.schedules[n]
		info := wire.Schedule{
			Name: n, Channel: c.cfg.Channel, Cron: c.cfg.Cron, Timezone: c.cfg.Timezone,
			Lead: wire.Duration(c.cfg.Lead), MaxLate: wire.Duration(c.cfg.MaxLate), Audience: wire.Audience(c.cfg.Audience),
			NextFire: c.next(now),
		}
		if r := last[n]; r != nil {
			j := r.out()
			info.LastRun = &j
		}
		out = append(out, info)
	}
	return out, nil
}

// RunOptions say which fire time "run now" runs.
//
// The outcomes are wire.RunCreated, wire.RunResumed and wire.RunExists.
type RunOptions struct {
	// FireTime is the fire time to run; zero: now (to the second), a run of
	// its own, so a door that reads a time refuses the zero time itself
	// (service.RunSchedule). It may not be in the future: a future fire time
	// is the schedule's own to create.
	FireTime time.Time
	// Last: the schedule's latest fire time at or before now (the run an
	// outage may have cut short). Exclusive with FireTime.
	Last bool
	// Force sends that fire time again to everyone, under new idempotency
	// keys, even though it already ran (a forced re-run, wire.Job.Rerun > 0).
	Force bool
}

// Outcomes of RunNow (the API's values).
const (
	RunCreated = wire.RunCreated
	RunResumed = wire.RunResumed
	RunExists  = wire.RunExists
)

// ErrAlreadyRan: RunNow of a fire time whose run is DONE, without Force.
var ErrAlreadyRan = errors.New("already ran")

// RunNow creates or resumes a run of the schedule for a fire time, and says
// which it did. A fire time's run is one job however often it is asked for:
// a PENDING or RUNNING run is returned as it is (RunExists); a FAILED,
// CANCELLED or SKIPPED one goes back to PENDING from its cursor (RunResumed),
// and since its idempotency keys are the fire time's, a recipient it already
// materialised is not sent twice; a DONE one is refused with ErrAlreadyRan
// (and the job) unless o.Force, which creates the fire time's next re-run: a
// run that sends to everyone again, once, under keys of its own. The job's
// Outcome says which it did (RunCreated, RunResumed, RunExists; "" with
// ErrAlreadyRan).
func (s *Service) RunNow(ctx context.Context, name string, o RunOptions) (wire.Job, error) {
	job, outcome, err := s.runNow(ctx, name, o)
	if job == nil {
		return wire.Job{}, err
	}
	out := job.out()
	out.Outcome = outcome
	return out, err
}

// runNow is RunNow, answering the row and the outcome apart.
func (s *Service) runNow(ctx context.Context, name string, o RunOptions) (*jobRow, string, error) {
	c, ok := s.schedules[name]
	if !ok {
		return nil, "", fmt.Errorf("schedule %q: %w", name, ErrUnknownSchedule)
	}
	now := s.now()
	fire := o.FireTime
	switch {
	case o.Last && !fire.IsZero():
		return nil, "", fmt.Errorf("run schedule %q: give a fire time or ask for the last one, not both: %w", name, ErrInvalid)
	case o.Last:
		fire = c.prev(now)
		if fire.IsZero() {
			return nil, "", fmt.Errorf("run schedule %q: it has no fire time at or before %s: %w", name, now.Format(time.RFC3339), ErrInvalid)
		}
	case fire.IsZero():
		fire = now.Truncate(time.Second)
	case fire.After(now):
		return nil, "", fmt.Errorf("run schedule %q: fire time %s is in the future; the schedule creates that run itself, %s before it: %w",
			name, fire.Format(time.RFC3339), c.cfg.Lead, ErrInvalid)
	}
	fire = fire.In(c.loc)
	contentKey, err := c.contentKey(fire)
	if err != nil {
		return nil, "", fmt.Errorf("run schedule %q: %w: %w", name, err, ErrInvalid)
	}
	n := newJob{
		kind: KindSchedule, schedule: name, timezone: c.cfg.Timezone, channel: c.cfg.Channel,
		fireTime: fire, audience: c.cfg.Audience, payload: c.cfg.Payload,
		state: jobPending, now: now, contentKey: contentKey,
	}
	if o.Force {
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(rerun) + 1, 0) FROM jobs WHERE schedule = $1 AND fire_time = $2`,
			name, fire).Scan(&n.rerun); err != nil {
			return nil, "", fmt.Errorf("run schedule %q: %w", name, err)
		}
		// Two forced calls racing for the same number: the loser gets the
		// winner's job (RunExists), not a third run.
	}
	job, created, err := jobInsert(ctx, s.pool, n)
	if err != nil {
		return nil, "", fmt.Errorf("run schedule %q: %w", name, err)
	}
	if created {
		s.log.Info("schedule run created by an operator", "schedule", name, "fire_time", fire.Format(time.RFC3339),
			"job", job.ID, "rerun", job.Rerun)
		return job, RunCreated, nil
	}
	switch job.State {
	case jobPending, jobRunning:
		return job, RunExists, nil
	case jobDone:
		return job, "", fmt.Errorf("schedule %q already ran for fire time %s (job %d, DONE: %d done, %d failed, %d skipped); nothing was sent again — force a re-run to send it to everyone again: %w",
			name, fire.Format(time.RFC3339), job.ID, job.Done, job.Failed, job.Skipped, ErrAlreadyRan)
	}
	// FAILED, CANCELLED, SKIPPED: resume from the cursor.
	resumed, err := scanJob(s.pool.QueryRow(ctx, `
		UPDATE jobs SET state = 'PENDING', finished_at = NULL, updated_at = $2, takeovers = 0,
		       last_error = 'resumed by an operator after: ' || coalesce(last_error, state)
		WHERE id = $1 AND state IN ('FAILED', 'CANCELLED', 'SKIPPED')
		RETURNING `+jobColumns, job.ID, now))
	if errors.Is(err, pgx.ErrNoRows) { // it changed under us: say what it is now
		if job, err = s.getJob(ctx, job.ID); err != nil {
			return nil, "", err
		}
		return job, RunExists, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("run schedule %q: resume job %d: %w", name, job.ID, err)
	}
	s.log.Info("schedule run resumed by an operator", "schedule", name, "fire_time", fire.Format(time.RFC3339), "job", job.ID, "was", job.State)
	return resumed, RunResumed, nil
}

// CreateCampaign validates the campaign (channel configured, audience shape
// and, for a query, its columns; payload templates) and creates its job,
// PENDING, due now. c.ContentKey "" is this campaign alone.
func (s *Service) CreateCampaign(ctx context.Context, c wire.Campaign) (wire.Job, error) {
	if _, ok := s.cfg.Channels[c.Channel]; !ok {
		return wire.Job{}, fmt.Errorf("campaign: channel %q is not configured: %w", c.Channel, ErrInvalid)
	}
	if c.Audience.Topic != "" && !config.NameRE.MatchString(c.Audience.Topic) {
		return wire.Job{}, fmt.Errorf("campaign: topic %q must match %s: %w", c.Audience.Topic, config.NameRE, ErrInvalid)
	}
	aud, err := newAudience(c.Audience, c.Channel)
	if err != nil {
		return wire.Job{}, fmt.Errorf("campaign: %w: %w", err, ErrInvalid)
	}
	if qa, ok := aud.(*queryAudience); ok {
		if err := qa.check(ctx, s.pool); err != nil {
			return wire.Job{}, fmt.Errorf("campaign: %w: %w", err, ErrInvalid)
		}
	}
	if _, err := compilePayload(c.Payload); err != nil {
		return wire.Job{}, fmt.Errorf("campaign: %w: %w", err, ErrInvalid)
	}
	if c.ContentKey != "" {
		if _, err := checkContentKey(c.ContentKey); err != nil {
			return wire.Job{}, fmt.Errorf("campaign: %w: %w", err, ErrInvalid)
		}
	}
	job, _, err := jobInsert(ctx, s.pool, newJob{
		kind: KindCampaign, timezone: "UTC", channel: c.Channel, audience: config.Audience(c.Audience),
		payload: c.Payload, state: jobPending, now: s.now(), contentKey: c.ContentKey,
	})
	if err != nil {
		return wire.Job{}, fmt.Errorf("create campaign: %w", err)
	}
	s.log.Info("campaign created", "job", job.ID, "channel", c.Channel, "topic", c.Audience.Topic)
	return job.out(), nil
}

// ListJobs lists jobs newest first, filtered by q's kind, schedule and
// state (zero fields do not filter), with ids below q.Before (0: from the
// newest); q.Limit 0 is 50, at most 1000. A page also stops at the job that
// passes outbox.MaxPageBytes past its first, as a dead-letter page does:
// each job's template reads back within MaxTemplateReadBytes, but 1,000 of
// them would be 128 MiB of text and several times that decoded. Fewer jobs
// than q.Limit is then no end: the next page goes on from the last id.
func (s *Service) ListJobs(ctx context.Context, q wire.JobQuery) ([]wire.Job, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	// A page cut short stops the query rather than Close draining the rest
	// of its rows off the wire (outbox's readPage).
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	rows, err := s.pool.Query(ctx, `
		SELECT `+jobColumns+` FROM jobs
		WHERE ($1 = '' OR kind = $1) AND ($2 = '' OR schedule = $2) AND ($3 = '' OR state = $3)
		  AND ($4 = 0 OR id < $4)
		ORDER BY id DESC LIMIT $5`, q.Kind, q.Schedule, q.State, q.Before, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []wire.Job
	size := 0
	for rows.Next() {
		if size >= outbox.MaxPageBytes {
			stop() // before rows.Close, deferred after it
			return out, nil
		}
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		size += j.size
		out = append(out, j.out())
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// JobProgress is what the job metrics read of a job.
type JobProgress struct {
	ID                    int64
	Kind, Schedule, State string
	Done                  int64
	Total                 *int64 // nil: not counted yet
}

// ActiveJobs lists the PENDING and RUNNING jobs, newest first, at most 1,000
// of each, reading only the columns the metrics show: never a job's
// audience, payload or error, which a scrape has no use for.
func (s *Service) ActiveJobs(ctx context.Context) ([]JobProgress, error) {
	rows, err := s.pool.Query(ctx, `
		(SELECT id, kind, coalesce(left(schedule, 200), ''), state, done, total FROM jobs
		  WHERE state = 'PENDING' ORDER BY id DESC LIMIT 1000)
		UNION ALL
		(SELECT id, kind, coalesce(left(schedule, 200), ''), state, done, total FROM jobs
		  WHERE state = 'RUNNING' ORDER BY id DESC LIMIT 1000)`)
	if err != nil {
		return nil, fmt.Errorf("list active jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobProgress, error) {
		var j JobProgress
		err := r.Scan(&j.ID, &j.Kind, &j.Schedule, &j.State, &j.Done, &j.Total)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("list active jobs: %w", err)
	}
	return out, nil
}

// GetJob returns one job; ErrNotFound if there is none.
func (s *Service) GetJob(ctx context.Context, id int64) (wire.Job, error) {
	j, err := s.getJob(ctx, id)
	if err != nil {
		return wire.Job{}, err
	}
	return j.out(), nil
}

// getJob is GetJob's row.
func (s *Service) getJob(ctx context.Context, id int64) (*jobRow, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// CancelJob stops a PENDING or RUNNING job and cancels its notifications that
// are still PENDING (rows already queued go on), in one transaction. It
// returns the job and how many notifications it cancelled; ErrJobFinished if
// the job had already ended.
func (s *Service) CancelJob(ctx context.Context, id int64) (wire.Job, int64, error) {
	now := s.now()
	var (
		job       *jobRow
		cancelled int64
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		job, err = scanJob(tx.QueryRow(ctx, `
			UPDATE jobs SET state = 'CANCELLED', owner = NULL, heartbeat_at = NULL,
			       finished_at = $2, updated_at = $2, last_error = 'cancelled'
			WHERE id = $1 AND state IN ('PENDING', 'RUNNING')
			RETURNING `+jobColumns, id, now))
		if err != nil {
			return err
		}
		// A worker's chunk commit holds the job row until it commits, so
		// every row it inserted is visible here; its next chunk finds the
		// job CANCELLED and inserts nothing.
		tag, err := tx.Exec(ctx, `
			UPDATE notifications SET status = 'CANCELLED', updated_at = $2
			WHERE phase = 0 AND job_id = $1`, id, now)
		cancelled = tag.RowsAffected()
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		j, gerr := s.GetJob(ctx, id)
		if gerr != nil {
			return wire.Job{}, 0, gerr
		}
		return j, 0, fmt.Errorf("cancel job %d: it is %s: %w", id, j.State, ErrJobFinished)
	}
	if err != nil {
		return wire.Job{}, 0, fmt.Errorf("cancel job %d: %w", id, err)
	}
	s.log.Info("job cancelled", "job", id, "notifications_cancelled", cancelled)
	return job.out(), cancelled, nil
}
