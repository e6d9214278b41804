package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/notifyd/notifyd/core/config"
)

// ScheduleInfo is a configured schedule with its next fire time and latest run.
type ScheduleInfo struct {
	Name     string          `json:"name"`
	Channel  string          `json:"channel"`
	Cron     string          `json:"cron"`
	Timezone string          `json:"timezone"`
	Lead     time.Duration   `json:"lead"`
	MaxLate  time.Duration   `json:"max_late"`
	Audience config.Audience `json:"audience"`
	NextFire time.Time       `json:"next_fire"`
	LastRun  *Job            `json:"last_run,omitempty"`
}

// Schedules lists the configured schedules, by name.
func (s *Service) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	now := s.now()
	names := s.scheduleNames()
	last := map[string]*Job{}
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
	out := make([]ScheduleInfo, 0, len(names))
	for _, n := range names {
		c := s.schedules[n]
		out = append(out, ScheduleInfo{
			Name: n, Channel: c.cfg.Channel, Cron: c.cfg.Cron, Timezone: c.cfg.Timezone,
			Lead: c.cfg.Lead, MaxLate: c.cfg.MaxLate, Audience: c.cfg.Audience,
			NextFire: c.next(now), LastRun: last[n],
		})
	}
	return out, nil
}

// RunNow creates a run of the schedule firing now (to the second); a running
// instance materialises it. Two calls within the same second return the same
// run.
func (s *Service) RunNow(ctx context.Context, name string) (*Job, error) {
	c, ok := s.schedules[name]
	if !ok {
		return nil, fmt.Errorf("schedule %q: %w", name, ErrUnknownSchedule)
	}
	now := s.now()
	job, _, err := jobInsert(ctx, s.pool, newJob{
		kind: KindSchedule, schedule: name, timezone: c.cfg.Timezone, channel: c.cfg.Channel,
		fireTime: now.Truncate(time.Second).In(c.loc), audience: c.cfg.Audience, payload: c.cfg.Payload,
		state: JobPending, now: now,
	})
	if err != nil {
		return nil, fmt.Errorf("run schedule %q now: %w", name, err)
	}
	return job, nil
}

// Campaign is an operator's ad-hoc bulk send.
type Campaign struct {
	Channel  string          `json:"channel"`
	Audience config.Audience `json:"audience"`
	Payload  map[string]any  `json:"payload"`
}

// CreateCampaign validates the campaign (channel configured, audience shape
// and, for a query, its columns; payload templates) and creates its job,
// PENDING, due now.
func (s *Service) CreateCampaign(ctx context.Context, c Campaign) (*Job, error) {
	if _, ok := s.cfg.Channels[c.Channel]; !ok {
		return nil, fmt.Errorf("campaign: channel %q is not configured: %w", c.Channel, ErrInvalid)
	}
	if c.Audience.Topic != "" && !config.NameRE.MatchString(c.Audience.Topic) {
		return nil, fmt.Errorf("campaign: topic %q must match %s: %w", c.Audience.Topic, config.NameRE, ErrInvalid)
	}
	aud, err := newAudience(c.Audience, c.Channel)
	if err != nil {
		return nil, fmt.Errorf("campaign: %w: %w", err, ErrInvalid)
	}
	if qa, ok := aud.(*queryAudience); ok {
		if err := qa.check(ctx, s.pool); err != nil {
			return nil, fmt.Errorf("campaign: %w: %w", err, ErrInvalid)
		}
	}
	if _, err := compilePayload(c.Payload); err != nil {
		return nil, fmt.Errorf("campaign: %w: %w", err, ErrInvalid)
	}
	job, _, err := jobInsert(ctx, s.pool, newJob{
		kind: KindCampaign, timezone: "UTC", channel: c.Channel, audience: c.Audience,
		payload: c.Payload, state: JobPending, now: s.now(),
	})
	if err != nil {
		return nil, fmt.Errorf("create campaign: %w", err)
	}
	s.log.Info("campaign created", "job", job.ID, "channel", c.Channel, "topic", c.Audience.Topic)
	return job, nil
}

// JobFilter narrows ListJobs; zero fields do not filter.
type JobFilter struct {
	Kind     string
	Schedule string
	State    JobState
	BeforeID int64 // page: jobs with id < BeforeID
	Limit    int   // default 50, at most 1000
}

// ListJobs lists jobs newest first.
func (s *Service) ListJobs(ctx context.Context, f JobFilter) ([]*Job, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	rows, err := s.pool.Query(ctx, `
		SELECT `+jobColumns+` FROM jobs
		WHERE ($1 = '' OR kind = $1) AND ($2 = '' OR schedule = $2) AND ($3 = '' OR state = $3)
		  AND ($4 = 0 OR id < $4)
		ORDER BY id DESC LIMIT $5`, f.Kind, f.Schedule, string(f.State), f.BeforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []*Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// GetJob returns one job; ErrNotFound if there is none.
func (s *Service) GetJob(ctx context.Context, id int64) (*Job, error) {
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
func (s *Service) CancelJob(ctx context.Context, id int64) (*Job, int64, error) {
	now := s.now()
	var (
		job       *Job
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
			WHERE job_id = $1 AND status = 'PENDING'`, id, now)
		cancelled = tag.RowsAffected()
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		j, gerr := s.GetJob(ctx, id)
		if gerr != nil {
			return nil, 0, gerr
		}
		return j, 0, fmt.Errorf("cancel job %d: it is %s: %w", id, j.State, ErrJobFinished)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("cancel job %d: %w", id, err)
	}
	s.log.Info("job cancelled", "job", id, "notifications_cancelled", cancelled)
	return job, cancelled, nil
}

// String is a one-line description of the job for logs and the CLI.
func (j *Job) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %d %s %s", j.ID, j.Kind, j.State)
	if j.Schedule != "" {
		fmt.Fprintf(&b, " schedule=%s fire_time=%s", j.Schedule, j.FireTime.Format(time.RFC3339))
	}
	total := "?"
	if j.Total != nil {
		total = fmt.Sprint(*j.Total)
	}
	fmt.Fprintf(&b, " done=%d/%s skipped=%d cursor=%q", j.Done, total, j.Skipped, j.Cursor)
	if j.Owner != "" {
		fmt.Fprintf(&b, " owner=%s", j.Owner)
	}
	return b.String()
}
