package schedule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
	"github.com/notifyd/notifyd/sdk/wire"
)

// Job states, the values of wire.Job.State. PENDING → RUNNING → DONE |
// FAILED | CANCELLED; a RUNNING job whose owner stopped gracefully goes back
// to PENDING (cursor kept). SKIPPED records a fire time missed by more than
// the schedule's max_late. DONE, FAILED, CANCELLED and SKIPPED are terminal
// (wire.Job.Terminal).
const (
	jobPending   = "PENDING"
	jobRunning   = "RUNNING"
	jobDone      = "DONE"
	jobFailed    = "FAILED"
	jobCancelled = "CANCELLED"
	jobSkipped   = "SKIPPED"
)

// Job kinds.
const (
	KindSchedule = "schedule"
	KindCampaign = "campaign"
)

// jobRow is a jobs row as the package works on it: the wire form the package's
// API answers with (out), and what only the worker needs beside it.
type jobRow struct {
	wire.Job
	// takeovers: how many times in a row this job was taken over from a
	// dead owner at its cursor (Service.isolate).
	takeovers int
	// unreadable says why the row's audience or payload cannot be read ("":
	// it can): written by SQL or before the template bounds. Such a job is
	// still listed, its payload a note (out); a worker that claims it finishes it
	// FAILED with the reason (materialise) instead of failing the claim,
	// which left it RUNNING for good and its audience's later jobs PENDING.
	unreadable string
	// size is about what the row read back: its variable-size columns.
	size int
}

// out is the job as the package's API answers it: the wire form, with its
// progress (Done/Total in [0, 1]) when its total is known, and for a row
// whose payload cannot be read a note of why in its place. It is the one
// place a row becomes a wire.Job.
func (j *jobRow) out() wire.Job {
	w := j.Job
	if j.unreadable != "" {
		w.Payload = map[string]any{"notifyd_omitted": j.unreadable}
	}
	w.Progress = nil
	if j.Total != nil {
		p := 1.0
		if *j.Total > 0 {
			p = min(1, float64(j.Done)/float64(*j.Total))
		}
		w.Progress = &p
	}
	return w
}

// idempotencyPrefix is what every row of the job's idempotency key starts
// with; the recipient follows. The rule (docs/design.md §6): one notification
// per recipient per content, where the content is
//
//   - the job's content key, when it has one: "content:<channel>:<key>:" —
//     shared by every job that names the same content on the channel, so a
//     recipient in two overlapping audiences is sent once;
//   - otherwise the schedule's fire time: "schedule:<name>:<fire time>:" —
//     stable across retries, takeovers and a "run now" of the same fire time;
//   - otherwise (a campaign) the campaign: "campaign:<job id>:".
//
// A forced re-run adds "rerun<n>:", so it sends to everyone again, once.
func (j *jobRow) idempotencyPrefix() string {
	var p string
	switch {
	case j.ContentKey != "":
		p = "content:" + j.Channel + ":" + j.ContentKey + ":"
	case j.Kind == KindCampaign:
		p = fmt.Sprintf("campaign:%d:", j.ID)
	default:
		p = "schedule:" + j.Schedule + ":" + j.FireTime.UTC().Format(time.RFC3339) + ":"
	}
	if j.Rerun > 0 {
		p += fmt.Sprintf("rerun%d:", j.Rerun)
	}
	return p
}

// dueAt is when the job's rows are due: a run's fire time, a campaign's
// creation. Rows materialised later than that are simply due at once.
func (j *jobRow) dueAt() time.Time {
	if j.Kind == KindCampaign {
		return j.CreatedAt
	}
	return j.FireTime
}

var jobColumns = `id, left(kind, ` + readPast(maxJobName) + `), left(coalesce(schedule, ''), ` + readPast(maxJobName) + `), fire_time,
	left(timezone, ` + readPast(maxJobName) + `), left(channel, ` + readPast(maxJobName) + `), ` + boundedJobAudience + `, ` + boundedJobPayload + `, state,
	left(coalesce(cursor, ''), ` + readPast(MaxCursorReadBytes) + `), done, skipped, failed, total, left(coalesce(owner, ''), ` + readPast(maxJobName) + `),
	heartbeat_at, left(coalesce(last_error, ''), ` + strconv.Itoa(wire.MaxErrorLen) + `),
	created_at, started_at, finished_at, updated_at, rerun, left(coalesce(content_key, ''), ` + readPast(maxJobName) + `), takeovers`

// A job's text columns are read back within bounds, as its payload is: a
// row written by SQL with a 30 MB cursor or error made every page of jobs
// that held it answer 60 MB (and every claim of it read as much). Each is
// read one byte past its bound, so a column over it is known without
// reading it: the job is then unreadable, never run on a cut value (its
// schedule, channel and content key make its idempotency keys, its cursor
// is where it resumes). The error is for people only, and cut.
const (
	// maxJobName bounds kind, schedule, timezone, channel, owner and content
	// key as they read back: every one notifyd writes is within 200 bytes
	// (config.NameRE's names, config.MaxContentKeyLen, an instance id).
	maxJobName = 1024
	// MaxCursorReadBytes bounds a job's cursor as it reads back: the last
	// member key of its audience (a subscriber id, a query's key column,
	// itself held to maxKeyLen).
	MaxCursorReadBytes = maxKeyLen
)

func readPast(limit int) string { return strconv.Itoa(limit + 1) }

// boundedJobAudience reads a job's audience (its topic, or its query and
// key) within MaxTemplateReadBytes, as boundedJobPayload reads the payload.
var boundedJobAudience = outbox.BoundedJSON("audience", "the audience", MaxTemplateReadBytes,
	func(reason string) string { return `'!' || ` + reason })

// boundedJobPayload reads a job's payload template as text only within
// MaxTemplateReadBytes, measured in Postgres, as the outbox reads a payload
// (outbox.BoundedJSON): a row written past CreateCampaign's checks (by SQL,
// or before them) with 1e100000 in it would otherwise print 100,001 digits
// into every claim and page that reads it. Past the bound the column reads
// as '!' and the reason: jsonb text never begins with '!'.
var boundedJobPayload = outbox.BoundedJSON("payload", "the payload template", MaxTemplateReadBytes,
	func(reason string) string { return `'!' || ` + reason })

// scanJob reads a row of jobColumns. An audience or payload that cannot be
// read is no error: the row says why (unreadable), so one such row neither
// fails a page of jobs nor wedges the worker that claims it.
func scanJob(row pgx.Row) (*jobRow, error) {
	var (
		j                                  jobRow
		audience, payload                  []byte
		fire, heartbeat, started, finished *time.Time
	)
	err := row.Scan(&j.ID, &j.Kind, &j.Schedule, &fire, &j.Timezone, &j.Channel, &audience, &payload, &j.State,
		&j.Cursor, &j.Done, &j.Skipped, &j.Failed, &j.Total, &j.Owner, &heartbeat, &j.Error,
		&j.CreatedAt, &started, &finished, &j.UpdatedAt, &j.Rerun, &j.ContentKey, &j.takeovers)
	if err != nil {
		return nil, err
	}
	j.size = len(audience) + len(payload) + len(j.Cursor) + len(j.Error) + len(j.Schedule) + len(j.Channel) + len(j.ContentKey)
	if bytes.HasPrefix(audience, []byte("!")) {
		j.unreadable = string(audience[1:])
	} else if err := json.Unmarshal(audience, &j.Audience); err != nil {
		j.unreadable = fmt.Sprintf("its audience does not decode: %v", err)
		j.Audience = wire.Audience{}
	}
	for _, c := range []struct {
		name  string
		value *string
		limit int
	}{{"kind", &j.Kind, maxJobName}, {"schedule", &j.Schedule, maxJobName}, {"timezone", &j.Timezone, maxJobName},
		{"channel", &j.Channel, maxJobName}, {"owner", &j.Owner, maxJobName}, {"content_key", &j.ContentKey, maxJobName},
		{"cursor", &j.Cursor, MaxCursorReadBytes}} {
		if len(*c.value) > c.limit {
			*c.value = (*c.value)[:c.limit]
			j.unreadable = fmt.Sprintf("its %s reads back past %d bytes", c.name, c.limit)
		}
	}
	if bytes.HasPrefix(payload, []byte("!")) {
		j.unreadable = string(payload[1:])
	} else if err := decodeTemplate(payload, &j.Payload); err != nil {
		j.unreadable = fmt.Sprintf("its payload template does not decode: %v", err)
	}
	if j.unreadable != "" {
		j.Payload = nil // never a template: out() shows why instead
	}
	loc, err := config.LoadZone(j.Timezone) // never the machine's own: instances would differ
	if err != nil {
		loc = time.UTC
	}
	j.FireTime, j.Heartbeat, j.StartedAt, j.FinishedAt = deref(fire), deref(heartbeat), deref(started), deref(finished)
	if !j.FireTime.IsZero() {
		j.FireTime = j.FireTime.In(loc)
	}
	return &j, nil
}

// decodeTemplate decodes a stored payload template with its numbers as
// json.Number, exactly as they were written (as GetSubscriber does for
// attributes): as float64, 12345678901234567890 was answered and sent as
// 12345678901234567000, and 1e309 failed every read of the row.
func decodeTemplate(b []byte, p *map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(p)
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func audienceJSON(a config.Audience) ([]byte, error) {
	return json.Marshal(map[string]string{"topic": a.Topic, "query": a.Query, "key": a.Key})
}

// newJob is a job about to be inserted.
type newJob struct {
	kind, schedule, timezone, channel string
	fireTime                          time.Time // zero for campaigns
	audience                          config.Audience
	payload                           map[string]any
	state                             string // jobPending or jobSkipped
	lastError                         string
	now                               time.Time
	rerun                             int    // 0, or a forced re-run's number
	contentKey                        string // "" or the rendered content key
}

// JobInsert inserts a job. A run that already exists for (schedule, fire
// time, rerun) is not inserted again: created is false and the existing job
// is returned.
func jobInsert(ctx context.Context, q querier, n newJob) (job *jobRow, created bool, err error) {
	aud, err := audienceJSON(n.audience)
	if err != nil {
		return nil, false, fmt.Errorf("insert job: %w", err)
	}
	payload, err := json.Marshal(n.payload)
	if err != nil {
		return nil, false, fmt.Errorf("insert job: payload: %w", err)
	}
	var fire, finished *time.Time
	if !n.fireTime.IsZero() {
		fire = &n.fireTime
	}
	if n.state == jobSkipped {
		finished = &n.now
	}
	var sched *string
	if n.schedule != "" {
		sched = &n.schedule
	}
	job, err = scanJob(q.QueryRow(ctx, `
		INSERT INTO jobs (kind, schedule, fire_time, timezone, channel, audience, payload, state, last_error,
		                  created_at, updated_at, finished_at, rerun, content_key)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, nullif($9, ''), $10, $10, $11, $12, nullif($13, ''))
		ON CONFLICT (schedule, fire_time, rerun) DO NOTHING
		RETURNING `+jobColumns,
		n.kind, sched, fire, n.timezone, n.channel, aud, payload, n.state, n.lastError, n.now, finished, n.rerun, n.contentKey))
	if err == nil {
		return job, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("insert job: %w", err)
	}
	job, err = scanJob(q.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE schedule = $1 AND fire_time = $2 AND rerun = $3`, sched, fire, n.rerun))
	if err != nil {
		return nil, false, fmt.Errorf("read existing run %s at %s: %w", n.schedule, n.fireTime, err)
	}
	return job, false, nil
}

// jobClaim moves the oldest PENDING job to RUNNING under owner, skipping
// jobs whose audience (channel and topic, or channel and query) already has
// a RUNNING job — they wait their turn, so a campaign and a schedule run over
// one topic never materialise side by side — and the jobs in exclude. It
// returns nil when there is nothing to claim.
func jobClaim(ctx context.Context, q querier, owner string, now time.Time, exclude []int64, onlyID int64) (*jobRow, error) {
	job, err := scanJob(q.QueryRow(ctx, `
		UPDATE jobs SET state = 'RUNNING', owner = $1, heartbeat_at = $2, updated_at = $2,
		                started_at = coalesce(started_at, $2)
		WHERE id = (
			SELECT c.id FROM jobs c
			WHERE c.state = 'PENDING' AND NOT c.id = ANY($3) AND ($4 = 0 OR c.id = $4)
			  AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.audience_key = c.audience_key AND r.state = 'RUNNING')
			ORDER BY c.id
			LIMIT 1
			FOR UPDATE SKIP LOCKED)
		  AND state = 'PENDING'
		RETURNING `+jobColumns, owner, now, exclude, onlyID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case isUniqueViolation(err):
		// Another instance started a job over the same audience between our
		// check and our update: at most one RUNNING per audience holds
		// (jobs_one_running_per_audience).
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("claim job: %w", err)
	}
	return job, nil
}

// jobTakeOver makes owner the owner of a RUNNING job whose heartbeat is older
// than staleBefore. The update is conditional on the owner and heartbeat read
// a moment before, so of several instances (or a late heartbeat from the old
// owner) exactly one wins. It returns nil when nothing is stuck.
func jobTakeOver(ctx context.Context, q querier, owner string, now, staleBefore time.Time, exclude []int64) (*jobRow, error) {
	var (
		id       int64
		oldOwner string
		oldBeat  time.Time
	)
	err := q.QueryRow(ctx, `
		SELECT id, coalesce(owner, ''), heartbeat_at FROM jobs
		WHERE state = 'RUNNING' AND heartbeat_at < $1 AND NOT id = ANY($2)
		ORDER BY id LIMIT 1`, staleBefore, exclude).Scan(&id, &oldOwner, &oldBeat)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find stuck job: %w", err)
	}
	// takeovers counts the takeovers in a row at one cursor: the worker then
	// isolates the members after it, and past jobs.max_takeovers quarantines
	// the one there (Service.isolate). The job itself goes on.
	job, err := scanJob(q.QueryRow(ctx, `
		WITH cur AS (
			SELECT id AS cid, CASE WHEN coalesce(cursor, '') = coalesce(takeover_cursor, '') THEN takeovers + 1 ELSE 1 END AS n
			FROM jobs WHERE id = $1)
		UPDATE jobs j SET
			takeovers = cur.n, takeover_cursor = coalesce(j.cursor, ''), heartbeat_at = $5, updated_at = $5, owner = $2
		FROM cur
		WHERE j.id = cur.cid AND j.state = 'RUNNING' AND j.owner IS NOT DISTINCT FROM nullif($3, '') AND j.heartbeat_at = $4
		RETURNING `+jobColumns, id, owner, oldOwner, oldBeat, now))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // someone else took it over, or the owner came back
	}
	if err != nil {
		return nil, fmt.Errorf("take over job %d: %w", id, err)
	}
	return job, nil
}

// jobHeartbeat renews the owner's heartbeat; false means the job is no longer
// this owner's RUNNING job (taken over, cancelled).
func jobHeartbeat(ctx context.Context, q pgxExecer, id int64, owner string, now time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE jobs SET heartbeat_at = $3 WHERE id = $1 AND owner = $2 AND state = 'RUNNING'`, id, owner, now)
	if err != nil {
		return false, fmt.Errorf("heartbeat job %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// jobSetTotal records the audience size once, guarded on ownership.
func jobSetTotal(ctx context.Context, q pgxExecer, id int64, owner string, total int64) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE jobs SET total = $3 WHERE id = $1 AND owner = $2 AND state = 'RUNNING'`, id, owner, total)
	if err != nil {
		return false, fmt.Errorf("set total of job %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// jobFinishIfRunning moves the owner's RUNNING job to a terminal state or, for
// PENDING, releases it (cursor kept) for any instance to resume.
func jobFinishIfRunning(ctx context.Context, q pgxExecer, id int64, owner string, state, msg string, now time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `
		UPDATE jobs SET state = $3, last_error = nullif($4, ''), updated_at = $5,
		       owner = NULL, heartbeat_at = NULL,
		       finished_at = CASE WHEN $3 = 'PENDING' THEN NULL ELSE $5::timestamptz END
		WHERE id = $1 AND owner = $2 AND state = 'RUNNING'`, id, owner, state, msg, now)
	if err != nil {
		return false, fmt.Errorf("set job %d %s: %w", id, state, err)
	}
	return tag.RowsAffected() == 1, nil
}

type pgxExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func isUniqueViolation(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23505"
}
