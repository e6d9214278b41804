package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/notifyd/notifyd/config"
	"github.com/notifyd/notifyd/internal/outbox"
)

// errDeposed: the job is no longer this owner's RUNNING job — another
// instance took it over, or it was cancelled. The worker stops; nothing it
// had not committed is kept.
var errDeposed = errors.New("job is no longer ours")

// renderedChunk is a chunk ready to commit: parallel arrays for unnest.
type renderedChunk struct {
	recipients []string
	payloads   []string // one per recipient, or nil when every recipient gets static
	static     string
	processed  int    // audience members read, skipped ones included
	skipped    int    // of which without an address / recipient
	cursor     string // the cursor after this chunk
	last       bool   // the audience is exhausted: this commit finishes the job
	// failed are the members whose notification could not be made (a
	// template error, a bound): each becomes a FAILED notification with the
	// reason, and the run goes on.
	failed []failedRow
}

// failedRow is one audience member whose notification is FAILED at birth.
type failedRow struct {
	recipient string // storable: cut to the bound when longer
	keySuffix string // after the job's idempotency prefix: the recipient, or a hash of a long one
	reason    string
}

// runJob materialises a claimed job from its cursor to the end, one
// transaction per chunk. It returns nil when the job finished (DONE, FAILED)
// or was lost to another owner or a cancel.
func (s *Service) runJob(ctx context.Context, job *jobRow) error {
	log := s.log.With("job", job.ID, "kind", job.Kind, "schedule", job.Schedule)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		s.heartbeat(ctx, job, cancel)
	}()
	defer func() { cancel(nil); <-beatDone }()

	err := s.materialise(ctx, job, log)
	switch {
	case err == nil:
		log.Info("job done", "done", job.Done, "skipped", job.Skipped)
		return nil
	case errors.Is(err, errDeposed) || errors.Is(context.Cause(ctx), errDeposed):
		log.Info("job taken over or cancelled; stopping", "cursor", job.Cursor)
		return nil
	case errors.Is(err, errAbandon):
		return err // a test's simulated crash: leave the job exactly as it is
	}
	var perm *permanentError
	if errors.As(err, &perm) {
		log.Error("job failed", "error", err)
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer fcancel()
		if _, ferr := jobFinishIfRunning(fctx, s.pool, job.ID, s.owner, jobFailed, err.Error(), s.now()); ferr != nil {
			return errors.Join(err, ferr)
		}
		return nil
	}
	// Stopping, or trouble that may pass (a dropped connection): hand the job
	// back with its cursor so any instance resumes it. If even that fails the
	// heartbeat lapses and another instance takes the job over.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if _, rerr := jobFinishIfRunning(rctx, s.pool, job.ID, s.owner, jobPending, "", s.now()); rerr != nil {
		log.Warn("could not release job; it will be taken over after jobs.stuck_after", "error", rerr)
	}
	if ctx.Err() != nil && s.stopping() {
		log.Info("job released on stop", "cursor", job.Cursor)
		return nil
	}
	return fmt.Errorf("job %d: %w", job.ID, err)
}

// heartbeat renews the job's heartbeat every jobs.heartbeat until ctx ends;
// losing the job cancels the worker.
func (s *Service) heartbeat(ctx context.Context, job *jobRow, cancel context.CancelCauseFunc) {
	t := time.NewTicker(s.cfg.Jobs.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := jobHeartbeat(ctx, s.pool, job.ID, s.owner, s.now())
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("job heartbeat failed", "job", job.ID, "error", err)
		case err == nil && !ok:
			cancel(errDeposed)
			return
		}
	}
}

// materialise prepares a job (audience, payload, total) and runs its chunks:
// a static payload to a topic entirely inside Postgres, anything else by
// reading the audience ahead in a goroutine (keyset paging needs only the
// previous chunk's last key, not its commit) and rendering it here.
func (s *Service) materialise(ctx context.Context, job *jobRow, log hclog.Logger) error {
	if job.unreadable != "" {
		// Permanent: it reads the same way on every claim and takeover, and
		// a job left RUNNING would hold its audience's later jobs PENDING.
		return permanent(fmt.Errorf("job %d cannot be read, so it was not run: %s (the row was written past notifyd's checks: by SQL, or before them)",
			job.ID, job.unreadable))
	}
	aud, err := newAudience(job.Audience, job.Channel)
	if err != nil {
		return permanent(err)
	}
	if qa, ok := aud.(*queryAudience); ok {
		qa.timeout = s.audienceStatement
		if err := qa.check(ctx, s.pool); err != nil {
			return err // permanent when the query or its columns are wrong
		}
	}
	tmpl, err := compilePayload(job.Payload)
	if err != nil {
		return permanent(err)
	}
	if job.Total == nil {
		n, err := aud.count(ctx, s.pool)
		if err != nil {
			return err
		}
		if ok, err := jobSetTotal(ctx, s.pool, job.ID, s.owner, n); err != nil {
			return err
		} else if !ok {
			return errDeposed
		}
		job.Total = &n
	}
	if job.Cursor != "" {
		log.Info("resuming job", "cursor", job.Cursor, "done", job.Done)
	}

	conn, release, err := s.chunkConn(ctx)
	if err != nil {
		return err
	}
	defer release()
	if job.takeovers > 0 {
		log.Warn("job taken over from an owner that died; isolating its members", "takeovers", job.takeovers, "cursor", job.Cursor)
		if done, err := s.isolate(ctx, conn, job, aud, tmpl, log); done || err != nil {
			return err
		}
	}
	if ta, ok := aud.(topicAudience); ok && !tmpl.dynamic {
		static, err := tmpl.render(nil, newVars(job.dueAt(), job.Schedule), s.payloadLimit())
		if err != nil {
			return permanent(err)
		}
		err = s.materialiseInDB(ctx, conn, job, ta, string(static))
		if !outbox.IsRowError(err) {
			return err
		}
		// A row Postgres refuses: go on from the cursor rendering in Go,
		// where a chunk finds the row at fault (isolateBadRows).
		log.Warn("a chunk could not be stored; finding the rows at fault", "error", err)
	}
	return s.pipeline(ctx, conn, job, aud, tmpl)
}

// pipeline reads and renders chunks in a goroutine while this goroutine
// commits them one after another.
func (s *Service) pipeline(ctx context.Context, conn *pgxpool.Conn, job *jobRow, aud audienceSource, tmpl *payloadTemplate) error {
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	chunks := make(chan renderedChunk, 1)
	readErr := make(chan error, 1)
	go func() {
		defer close(chunks)
		readErr <- s.readAhead(readCtx, job, aud, tmpl, chunks)
	}()
	n := 0
	for c := range chunks {
		if s.beforeChunk != nil {
			s.beforeChunk(job.ID, n)
		}
		err := s.commitChunk(ctx, conn, job, c)
		if outbox.IsRowError(err) {
			// One row Postgres refuses must not hold the chunk, or the job.
			if c, err = s.isolateBadRows(ctx, conn, job, c); err == nil {
				err = s.commitChunk(ctx, conn, job, c)
			}
		}
		if err != nil {
			stopReading()
			for range chunks { // let the reader finish
			}
			return err
		}
		n++
		if s.afterChunk != nil {
			if err := s.afterChunk(job.ID, n); err != nil {
				stopReading()
				for range chunks {
				}
				return err
			}
		}
		if c.last {
			return nil
		}
	}
	if err := <-readErr; err != nil {
		return err
	}
	return ctx.Err()
}

// readAhead fetches and renders chunks from the job's cursor until the
// audience is exhausted.
func (s *Service) readAhead(ctx context.Context, job *jobRow, aud audienceSource, tmpl *payloadTemplate, out chan<- renderedChunk) error {
	r, err := s.newChunkReader(job, aud, tmpl)
	if err != nil {
		return err
	}
	cursor := job.Cursor
	for {
		rc, err := r.next(ctx, cursor, r.size)
		if err != nil {
			return err
		}
		select {
		case out <- rc:
		case <-ctx.Done():
			return ctx.Err()
		}
		if rc.last {
			return nil
		}
		cursor = rc.cursor
	}
}

// chunkReader reads and renders a job's audience a chunk at a time.
type chunkReader struct {
	s      *Service
	job    *jobRow
	aud    audienceSource
	tmpl   *payloadTemplate
	size   int
	vars   map[string]any
	limit  int
	static []byte
}

func (s *Service) newChunkReader(job *jobRow, aud audienceSource, tmpl *payloadTemplate) (*chunkReader, error) {
	r := &chunkReader{s: s, job: job, aud: aud, tmpl: tmpl, size: s.chunkSize(job),
		vars: newVars(job.dueAt(), job.Schedule), limit: s.payloadLimit()}
	if !tmpl.dynamic {
		var err error
		if r.static, err = tmpl.render(nil, r.vars, r.limit); err != nil {
			return nil, permanent(err) // the same for every recipient: the job's own fault
		}
	}
	return r, nil
}

// quarantine reads the one member after cursor and makes its notification
// FAILED with reason, without rendering it.
func (r *chunkReader) quarantine(ctx context.Context, cursor, reason string) (renderedChunk, error) {
	c, err := r.aud.fetch(ctx, r.s.pool, cursor, 1)
	if err != nil {
		return renderedChunk{}, err
	}
	rc := renderedChunk{processed: len(c.rows), cursor: cursor, last: len(c.rows) < 1, payloads: []string{}}
	if c.lastKey != "" {
		rc.cursor = c.lastKey
	}
	for _, m := range c.rows {
		if !m.ok {
			rc.skipped++
			continue
		}
		rc.failed = append(rc.failed, m.failed(reason))
	}
	return rc, nil
}

// isolate runs the members after a job's cursor one at a time, each
// committed before the next is read, when its owners died while it was in
// flight (job.takeovers, counted at the same cursor): a crash then leaves the
// cursor just before the member that caused it. Past jobs.max_takeovers at
// one cursor that member is quarantined — FAILED with the reason, never
// rendered — and the run goes on (docs/design.md §10). It covers the two
// chunks that may have been in flight (one committing, one read ahead), then
// hands back to the pipeline; done says the job finished.
func (s *Service) isolate(ctx context.Context, conn *pgxpool.Conn, job *jobRow, aud audienceSource, tmpl *payloadTemplate, log hclog.Logger) (done bool, err error) {
	r, err := s.newChunkReader(job, aud, tmpl)
	if err != nil {
		return false, err
	}
	maxTakeovers := cmp.Or(s.cfg.Jobs.MaxTakeovers, config.DefaultJobMaxTakeovers)
	for n := range 2 * r.size {
		if s.beforeChunk != nil {
			s.beforeChunk(job.ID, n)
		}
		var rc renderedChunk
		if job.takeovers > maxTakeovers {
			reason := fmt.Sprintf("quarantined: notifyd died %d times in a row while making this recipient's notification "+
				"(jobs.max_takeovers %d); not rendered — the rest of the run goes on", job.takeovers, maxTakeovers)
			rc, err = r.quarantine(ctx, job.Cursor, reason)
			if err == nil {
				log.Error("job member quarantined", "job", job.ID, "after", job.Cursor, "reason", reason)
			}
			job.takeovers = 0
		} else {
			rc, err = r.next(ctx, job.Cursor, 1)
		}
		if err != nil {
			return false, err
		}
		err = s.commitChunk(ctx, conn, job, rc)
		if outbox.IsRowError(err) {
			if rc, err = s.isolateBadRows(ctx, conn, job, rc); err == nil {
				err = s.commitChunk(ctx, conn, job, rc)
			}
		}
		if err != nil || rc.last {
			return rc.last, err
		}
		if s.afterChunk != nil {
			if err := s.afterChunk(job.ID, n+1); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

// next reads and renders up to size members after cursor, and fewer when
// what they hold passes MaxChunkBytes: the chunk then ends after the member
// that passed it, and the next goes on from that member's key.
func (r *chunkReader) next(ctx context.Context, cursor string, size int) (renderedChunk, error) {
	s, aud, tmpl, vars, limit, static := r.s, r.aud, r.tmpl, r.vars, r.limit, r.static
	c, err := aud.fetch(ctx, s.pool, cursor, size)
	if err != nil {
		return renderedChunk{}, err
	}
	rc := renderedChunk{
		recipients: make([]string, 0, len(c.rows)),
		processed:  len(c.rows),
		cursor:     cursor,
		last:       len(c.rows) < size && !c.cut,
	}
	if c.lastKey != "" {
		rc.cursor = c.lastKey
	}
	// Payloads are rendered into one buffer and cut from one string:
	// two allocations a chunk instead of one a recipient.
	var (
		buf  []byte
		ends []int
		data *dataDecoder
	)
	if static == nil && tmpl.usesData {
		raw := make([][]byte, 0, len(c.rows))
		for _, r := range c.rows {
			if r.ok {
				raw = append(raw, r.data)
			}
		}
		data = newDataDecoder(raw)
	}
	// member renders one member, or records why it is skipped or FAILED.
	member := func(r recipientRow) {
		if !r.ok {
			rc.skipped++
			return
		}
		var d any
		if data != nil {
			d, err = data.next() // read whatever happens below, to stay in step
		}
		if reason := r.problem(); reason != "" {
			rc.failed = append(rc.failed, r.failed(reason))
			return
		}
		if err != nil {
			rc.failed = append(rc.failed, r.failed(err.Error()))
			return
		}
		if data != nil && r.dataProblem != "" {
			rc.failed = append(rc.failed, r.failed(r.dataProblem))
			return
		}
		if static == nil {
			vars[varRecipient], vars[varData] = r.recipient, d
			if buf, err = tmpl.render(buf, vars, limit); err != nil {
				rc.failed = append(rc.failed, r.failed(err.Error()))
				return
			}
			ends = append(ends, len(buf))
		}
		rc.recipients = append(rc.recipients, r.recipient)
	}
	held := 0 // what the chunk holds besides buf: recipients, FAILED rows
	for i, r := range c.rows {
		// This member's own errors only: err is shared with every render,
		// and a member must never fail with an earlier member's error.
		err = nil
		recipients, failed := len(rc.recipients), len(rc.failed)
		member(r)
		if len(rc.recipients) > recipients {
			held += len(r.recipient)
		}
		if len(rc.failed) > failed {
			f := rc.failed[len(rc.failed)-1]
			held += len(f.recipient) + len(f.keySuffix) + len(f.reason)
		}
		if len(buf)+held >= MaxChunkBytes && i < len(c.rows)-1 {
			rc.processed, rc.cursor, rc.last = i+1, r.key, false
			break
		}
	}
	if static != nil {
		rc.static = string(static)
	} else {
		all, start := string(buf), 0
		rc.payloads = make([]string, 0, len(ends))
		for _, end := range ends {
			rc.payloads = append(rc.payloads, all[start:end])
			start = end
		}
	}
	return rc, nil
}

// chunkSize is the schedule's chunk_size for a run, jobs.chunk_size otherwise.
func (s *Service) chunkSize(job *jobRow) int {
	if cs, ok := s.schedules[job.Schedule]; ok && job.Kind == KindSchedule && cs.cfg.ChunkSize > 0 {
		return cs.cfg.ChunkSize
	}
	return s.cfg.Jobs.ChunkSize
}
