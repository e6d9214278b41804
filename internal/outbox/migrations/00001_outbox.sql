-- +goose Up
-- The outbox: one row per notification, the source of truth (DESIGN §2).
--
-- Every transition changes status and updated_at, both of which appear in an
-- index or an index predicate, so no update is HOT: each one adds an entry to
-- the primary key, to the idempotency index (rows that have a key) and to
-- whichever partial indexes the new row version matches. The partial indexes
-- below are therefore kept narrow: each holds only the rows of the state its
-- query reads.
CREATE TABLE notifications (
    -- Insert pre-allocates ids with nextval('notifications_id_seq') so that it
    -- can map each input row to its result without relying on RETURNING order.
    id              bigint GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME notifications_id_seq) PRIMARY KEY,
    -- COLLATE "C": channels and keys are identifiers, compared byte-wise
    -- (cheaper index inserts and lookups than a linguistic collation).
    channel         text        COLLATE "C" NOT NULL,
    recipient       text        NOT NULL,
    payload         jsonb       NOT NULL,
    idempotency_key text        COLLATE "C",
    status          text        NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'QUEUED', 'PROCESSING', 'SENT', 'FAILED', 'CANCELLED')),
    -- Incremented by each claim; the settle guard (id, attempts, PROCESSING).
    attempts        integer     NOT NULL DEFAULT 0,
    due_at          timestamptz NOT NULL DEFAULT now(),
    -- Set by a retry settle: the QUEUED row may not be claimed before it.
    next_attempt_at timestamptz,
    last_error      text,
    result          jsonb,
    job_id          bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);

-- Insert ... ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL
-- DO NOTHING, and GetByIdempotencyKey. Partial so that rows without a key
-- cost nothing here on insert and on every transition.
CREATE UNIQUE INDEX notifications_idempotency_key ON notifications (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Relay: WHERE status = 'PENDING' AND due_at <= $now ORDER BY due_at, id
-- LIMIT n FOR UPDATE SKIP LOCKED. Holds only the not-yet-queued rows.
CREATE INDEX notifications_pending_due ON notifications (due_at, id) WHERE status = 'PENDING';

-- Sweep and the Redis-loss resync: WHERE status IN ('QUEUED','PROCESSING')
-- AND updated_at < $olderThan AND id > $after ORDER BY id LIMIT n. Both walk
-- this index in id order, so a full pass costs one visit per in-flight row
-- (linear; measured 1.3 s for 1M in-flight rows of a 10M-row table when none
-- is stale) and never depends on the terminal rows, the bulk of the table.
-- An index on updated_at was rejected: the planner cannot tell in-flight
-- rows are the recent ones, and sorting every stale row by id for each page
-- makes a pass after an outage quadratic.
CREATE INDEX notifications_inflight_id ON notifications (id)
    WHERE status IN ('QUEUED', 'PROCESSING');

-- ListFailed / ReplayChannel / PurgeFailed of one channel:
-- WHERE status = 'FAILED' AND channel = $1 AND id > $after ORDER BY id.
CREATE INDEX notifications_failed_channel ON notifications (channel, id) WHERE status = 'FAILED';

-- ListFailed across every channel (channel = ''): WHERE status = 'FAILED'
-- AND id > $after ORDER BY id. Only FAILED rows, so it costs nothing on the
-- hot path.
CREATE INDEX notifications_failed_id ON notifications (id) WHERE status = 'FAILED';

-- The relay's wake-up: one NOTIFY per inserting statement (not per row; a
-- 10,000-row insert sends one), on a channel named after the schema so that
-- two notifyd deployments (or parallel tests) in one database do not wake
-- each other. Listen in outbox/listen.go is the other end. NOTIFY is
-- transactional: it is delivered when the inserting transaction commits, and
-- not at all when it rolls back.
--
-- Only while the relay is idle. A transaction that has sent a NOTIFY takes a
-- database-wide lock at commit and holds it through its WAL flush, so
-- notifying commits are serialised: with 4 connections inserting one row per
-- transaction, always notifying cut throughput by 30-70% here (pgbench).
-- Relay keeps wake_wanted = true while it drains the due rows (its last call
-- returned fewer than its limit) and false while it works through a backlog
-- (it calls again at once then, and needs no wake). An insert racing the
-- flip may go unannounced; the relay's polling covers it, as it covers a
-- lost wake of any kind.
CREATE TABLE outbox_relay_state (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    wake_wanted boolean NOT NULL DEFAULT true
);
INSERT INTO outbox_relay_state DEFAULT VALUES;

-- SET search_path FROM CURRENT: the trigger finds outbox_relay_state in this
-- schema even when an application inserts with another search_path.
-- +goose StatementBegin
CREATE FUNCTION notifications_notify() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF (SELECT wake_wanted FROM outbox_relay_state) THEN
        PERFORM pg_notify('notifyd_outbox_' || TG_TABLE_SCHEMA, '');
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER notifications_notify AFTER INSERT ON notifications
    FOR EACH STATEMENT EXECUTE FUNCTION notifications_notify();

-- The attempt log: why did recipient X not get it. One row per settled
-- attempt. A replay resets notifications.attempts, so attempt numbers repeat
-- after a replay: there is no unique key on (notification_id, attempt), and
-- history is read in insertion order (started_at, then finished_at).
--
-- No foreign key to notifications: the RI trigger costs a lookup per logged
-- row on the settle hot path (measured in outbox's BenchmarkSettle), and rows
-- are only written by Settle for notifications it has just updated in the
-- same statement. PurgeFailed deletes a notification's attempts with it.
CREATE TABLE notification_attempts (
    notification_id bigint      NOT NULL,
    attempt         integer     NOT NULL,
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz NOT NULL,
    outcome         text        NOT NULL CHECK (outcome IN ('SUCCESS', 'TRANSIENT', 'PERMANENT')),
    provider_status integer,
    provider_code   text,
    error           text
);

-- Get / GetByIdempotencyKey history: WHERE notification_id = $1; PurgeFailed's
-- delete of the purged rows' attempts.
CREATE INDEX notification_attempts_notification ON notification_attempts (notification_id, attempt);

-- +goose Down
DROP TABLE notification_attempts;
DROP TABLE notifications;
DROP FUNCTION notifications_notify();
DROP TABLE outbox_relay_state;
