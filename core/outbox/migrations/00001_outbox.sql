-- +goose Up
-- The outbox: one row per notification, the source of truth (DESIGN §2).
CREATE TABLE notifications (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel         text        NOT NULL,
    recipient       text        NOT NULL,
    payload         jsonb       NOT NULL,
    idempotency_key text        UNIQUE,  -- notifications_idempotency_key_key: insert ON CONFLICT
    status          text        NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'QUEUED', 'PROCESSING', 'SENT', 'FAILED', 'CANCELLED')),
    attempts        integer     NOT NULL DEFAULT 0,
    due_at          timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz,
    last_error      text,
    result          jsonb,
    job_id          bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);

-- Relay: WHERE status = 'PENDING' AND due_at <= now() ORDER BY due_at LIMIT n
-- FOR UPDATE SKIP LOCKED. Partial, so it holds only the not-yet-queued rows.
CREATE INDEX notifications_pending_due ON notifications (due_at) WHERE status = 'PENDING';

-- Sweeper and Redis-loss resync: WHERE status IN ('QUEUED','PROCESSING')
-- AND updated_at < now() - T. Partial: terminal rows (the bulk of a 10M table)
-- are not in it.
CREATE INDEX notifications_inflight_updated ON notifications (updated_at)
    WHERE status IN ('QUEUED', 'PROCESSING');

-- Dead-letter listing and replay by channel: WHERE status = 'FAILED' AND
-- channel = $1 AND id > $after ORDER BY id.
CREATE INDEX notifications_failed_channel ON notifications (channel, id) WHERE status = 'FAILED';

-- The attempt log: why did recipient X not get it.
CREATE TABLE notification_attempts (
    notification_id bigint      NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    attempt         integer     NOT NULL,
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz NOT NULL,
    outcome         text        NOT NULL CHECK (outcome IN ('SUCCESS', 'TRANSIENT', 'PERMANENT')),
    provider_status integer,
    provider_code   text,
    error           text,
    PRIMARY KEY (notification_id, attempt)  -- history lookup by notification
);

-- +goose Down
DROP TABLE notification_attempts;
DROP TABLE notifications;
