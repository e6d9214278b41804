package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/internal/outbox"
)

// commitChunk inserts a chunk's PENDING rows and advances the cursor in one
// statement, so one round trip and one (implicit) transaction a chunk. The
// job update is guarded on owner, state and the previous cursor, and the
// insert happens only if it matched: a deposed owner (or a second worker on
// the same job) changes nothing, and the job row lock the update takes
// orders the chunk against takeover and cancel.
func (s *Service) commitChunk(ctx context.Context, conn *pgxpool.Conn, job *jobRow, c renderedChunk) error {
	payloads := c.payloads
	var static *string
	if payloads == nil {
		payloads, static = []string{}, &c.static // sent and parsed once, not once per row
	}
	failedR, failedK, failedE := make([]string, len(c.failed)), make([]string, len(c.failed)), make([]string, len(c.failed))
	for i, f := range c.failed {
		failedR[i], failedK[i], failedE[i] = f.recipient, f.keySuffix, f.reason
	}
	var advanced int
	err := conn.QueryRow(ctx, `
		WITH job AS (
			UPDATE jobs SET cursor = nullif($4, ''), done = done + $5, skipped = skipped + $6, failed = failed + $18,
			       heartbeat_at = $7, updated_at = $7,
			       state = CASE WHEN $8 THEN 'DONE' ELSE state END,
			       finished_at = CASE WHEN $8 THEN $7::timestamptz END,
			       owner = CASE WHEN $8 THEN NULL ELSE owner END
			WHERE id = $1 AND owner = $2 AND state = 'RUNNING' AND coalesce(cursor, '') = $3
			RETURNING id),
		ins AS (
			INSERT INTO notifications (channel, recipient, payload, idempotency_key, status, due_at, job_id,
			                           created_at, updated_at)
			SELECT $9, r, coalesce(p::jsonb, $10::jsonb), $11 || r, 'PENDING', $12, $1, $7, $7
			FROM unnest($13::text[], $14::text[]) AS t(r, p)
			WHERE EXISTS (SELECT 1 FROM job)
			ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING),
		-- Members whose notification could not be made: FAILED at birth,
		-- with the reason, under the same key scheme.
		failed AS (
			INSERT INTO notifications (channel, recipient, payload, idempotency_key, status, due_at, job_id,
			                           last_error, created_at, updated_at)
			SELECT $9, r, '{}'::jsonb, $11 || k, 'FAILED', $12, $1, e, $7, $7
			FROM unnest($15::text[], $16::text[], $17::text[]) AS t(r, k, e)
			WHERE EXISTS (SELECT 1 FROM job)
			ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING)
		SELECT count(*) FROM job`,
		job.ID, s.owner, job.Cursor, c.cursor, c.processed, c.skipped, s.now(), c.last,
		job.Channel, static, job.idempotencyPrefix(), job.dueAt(), c.recipients, payloads,
		failedR, failedK, failedE, len(c.failed)).Scan(&advanced)
	if err != nil {
		return fmt.Errorf("commit chunk of job %d (%d notifications): %w", job.ID, len(c.recipients), err)
	}
	if advanced != 1 {
		return errDeposed
	}
	job.Cursor = c.cursor
	job.Done += int64(c.processed)
	job.Skipped += int64(c.skipped)
	job.Failed += int64(len(c.failed))
	if c.last {
		job.State = jobDone
	}
	return nil
}

// chunkConn is the connection a job commits its chunks on, with
// synchronous_commit off: a chunk's rows and its cursor commit or vanish
// together, so a commit that a Postgres crash loses only rewinds the job to
// an earlier cursor, from which it re-materialises the same rows; and any
// later synchronous commit (the relay's) flushes it first. The setting is
// reset before the connection goes back to the pool.
func (s *Service) chunkConn(ctx context.Context) (*pgxpool.Conn, func(), error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire a connection: %w", err)
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(rctx, `RESET synchronous_commit`); err != nil {
			_ = conn.Conn().Close(rctx) // never hand a changed session to someone else
		}
		conn.Release()
	}
	if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		release()
		return nil, nil, fmt.Errorf("set synchronous_commit: %w", err)
	}
	return conn, release, nil
}

// materialiseInDB runs a job whose payload is the same for everyone and
// whose audience is a topic without the rows ever leaving Postgres: each
// chunk is one statement that reads the next page of the topic, advances the
// job (guarded as in commitChunk) and inserts the page's rows.
func (s *Service) materialiseInDB(ctx context.Context, conn *pgxpool.Conn, job *jobRow, a topicAudience, static string) error {
	size := s.chunkSize(job)
	for n := 0; ; n++ {
		if s.beforeChunk != nil {
			s.beforeChunk(job.ID, n)
		}
		var after int64
		if job.Cursor != "" {
			var err error
			if after, err = strconv.ParseInt(job.Cursor, 10, 64); err != nil {
				return permanent(fmt.Errorf("topic %q: cursor %q is not a subscriber id", a.topic, job.Cursor))
			}
		}
		var (
			cursor                *string
			state                 string
			read, skipped, failed int
		)
		err := conn.QueryRow(ctx, materialiseChunkSQL(size),
			a.topic, a.channel, after, s.now(), job.ID, s.owner, job.Cursor,
			job.Channel, static, job.idempotencyPrefix(), job.dueAt()).Scan(&cursor, &state, &read, &skipped, &failed)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return errDeposed
		case err != nil:
			return fmt.Errorf("commit chunk of job %d: %w", job.ID, err)
		}
		if cursor != nil {
			job.Cursor = *cursor
		}
		job.Done += int64(read)
		job.Skipped += int64(skipped)
		job.Failed += int64(failed)
		job.State = state
		if s.afterChunk != nil {
			if err := s.afterChunk(job.ID, n+1); err != nil {
				return err
			}
		}
		if state == jobDone {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// isolateBadRows finds the rows of a chunk that Postgres refuses (the chunk's
// insert failed with outbox.IsRowError: an operator's trigger or constraint,
// say) by inserting halves of it in transactions that are always rolled
// back, and moves them to the chunk's failed rows with the reason, so the
// chunk can commit and the run go on. It costs nothing unless a chunk
// failed.
func (s *Service) isolateBadRows(ctx context.Context, conn *pgxpool.Conn, job *jobRow, c renderedChunk) (renderedChunk, error) {
	try := func(idx []int) error {
		rs, ps := make([]string, len(idx)), make([]string, 0, len(idx))
		for i, k := range idx {
			rs[i] = c.recipients[k]
			if c.payloads != nil {
				ps = append(ps, c.payloads[k])
			}
		}
		var static *string
		if c.payloads == nil {
			static = &c.static
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		_, err = tx.Exec(ctx, `
			INSERT INTO notifications (channel, recipient, payload, idempotency_key, status, due_at, job_id)
			SELECT $1, r, coalesce(p::jsonb, $2::jsonb), $3 || r, 'PENDING', $4, $5
			FROM unnest($6::text[], $7::text[]) AS t(r, p)
			ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`,
			job.Channel, static, job.idempotencyPrefix(), job.dueAt(), job.ID, rs, ps)
		return err
	}
	var bad []int
	reasons := map[int]string{}
	var find func(idx []int) error
	find = func(idx []int) error {
		err := try(idx)
		switch {
		case err == nil:
			return nil
		case !outbox.IsRowError(err):
			return err
		case len(idx) == 1:
			bad = append(bad, idx[0])
			reasons[idx[0]] = fmt.Sprintf("could not be stored (%v)", err)
			return nil
		}
		mid := len(idx) / 2
		if err := find(idx[:mid]); err != nil {
			return err
		}
		return find(idx[mid:])
	}
	all := make([]int, len(c.recipients))
	for i := range all {
		all[i] = i
	}
	if err := find(all); err != nil {
		return c, fmt.Errorf("find the rows at fault in a chunk of job %d: %w", job.ID, err)
	}
	if len(bad) == 0 {
		return c, fmt.Errorf("chunk of job %d failed, but no row of it alone does", job.ID)
	}
	isBad := make(map[int]bool, len(bad))
	for _, k := range bad {
		isBad[k] = true
		c.failed = append(c.failed, failedFor(c.recipients[k], reasons[k]))
	}
	keep := c.recipients[:0:0]
	var keepP []string
	if c.payloads != nil {
		keepP = []string{} // still rendered, even when no row is left: never the static path
	}
	for k, r := range c.recipients {
		if isBad[k] {
			continue
		}
		keep = append(keep, r)
		if c.payloads != nil {
			keepP = append(keepP, c.payloads[k])
		}
	}
	c.recipients, c.payloads = keep, keepP
	s.log.Error("rows of a chunk could not be stored; recorded them FAILED", "job", job.ID, "rows", len(bad))
	return c, nil
}

// materialiseChunkSQL is one chunk of materialiseInDB: $1 the topic, $2 the
// channel, $3 the last subscriber id read, $4 now, $5 the job, $6 its owner,
// $7 its cursor, $8 the channel inserted, $9 the payload, $10 the
// idempotency-key prefix, $11 the due time. The LIMIT is a literal, as in
// topicAudience.fetch.
func materialiseChunkSQL(size int) string {
	n := strconv.Itoa(outbox.MaxRecipientLen)
	return `
		WITH page AS (
			SELECT ts.subscriber_id AS id,
			       CASE WHEN octet_length(a.v) <= ` + n + ` THEN nullif(a.v, '') END AS r,
			       octet_length(a.v) > ` + n + ` AS long,
			       CASE WHEN octet_length(a.v) > ` + n + ` THEN left(a.v, ` + strconv.Itoa(outbox.MaxRecipientLen/4) + `) END AS cut,
			       CASE WHEN octet_length(a.v) > ` + n + ` THEN encode(sha256(convert_to(a.v, 'UTF8')), 'hex') END AS sum,
			       octet_length(a.v) AS len
			FROM (SELECT subscriber_id FROM topic_subscriptions
			      WHERE topic = $1 AND subscriber_id > $3
			      ORDER BY subscriber_id LIMIT ` + strconv.Itoa(size) + `) ts
			JOIN subscribers s ON s.id = ts.subscriber_id
			-- The address printed once (OFFSET 0 keeps a from being
			-- flattened into every read of a.v).
			CROSS JOIN LATERAL (SELECT s.addresses ->> $2 OFFSET 0) a(v)),
		stats AS (
			SELECT count(*)::int AS n, count(*) FILTER (WHERE r IS NULL AND long IS NOT TRUE)::int AS skipped,
			       count(*) FILTER (WHERE long)::int AS failed, max(id)::text AS last,
			       count(*) < ` + strconv.Itoa(size) + ` AS last_chunk
			FROM page),
		job AS (
			UPDATE jobs SET cursor = coalesce((SELECT last FROM stats), cursor),
			       done = done + (SELECT n FROM stats), skipped = skipped + (SELECT skipped FROM stats),
			       failed = failed + (SELECT failed FROM stats),
			       heartbeat_at = $4, updated_at = $4,
			       state = CASE WHEN (SELECT last_chunk FROM stats) THEN 'DONE' ELSE state END,
			       finished_at = CASE WHEN (SELECT last_chunk FROM stats) THEN $4::timestamptz END,
			       owner = CASE WHEN (SELECT last_chunk FROM stats) THEN NULL ELSE owner END
			WHERE id = $5 AND owner = $6 AND state = 'RUNNING' AND coalesce(cursor, '') = $7
			RETURNING cursor, state),
		ins AS (
			INSERT INTO notifications (channel, recipient, payload, idempotency_key, status, due_at, job_id,
			                           created_at, updated_at)
			SELECT $8, r, $9::jsonb, $10 || r, 'PENDING', $11, $5, $4, $4
			FROM page
			WHERE r IS NOT NULL AND EXISTS (SELECT 1 FROM job)
			ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING),
		-- An address too long to be a recipient (written by SQL: the API
		-- refuses one) is FAILED at birth, as on the rendering path
		-- (failedFor): its beginning, a key from the hash of the whole.
		failed AS (
			INSERT INTO notifications (channel, recipient, payload, idempotency_key, status, due_at, job_id,
			                           last_error, created_at, updated_at)
			SELECT $8, cut, '{}'::jsonb, $10 || 'sha256:' || sum, 'FAILED', $11, $5,
			       'recipient is ' || len || ' bytes long, at most ` + n + ` (stored cut here)', $4, $4
			FROM page
			WHERE long AND EXISTS (SELECT 1 FROM job)
			ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING)
		SELECT job.cursor, job.state, stats.n, stats.skipped, stats.failed FROM job, stats`
}
