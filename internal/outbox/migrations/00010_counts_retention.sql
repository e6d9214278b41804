-- +goose Up
-- Counts that do not scan (internal/outbox/counts.go). Statement-level triggers
-- append the net change of each INSERT, UPDATE and DELETE on notifications
-- to notification_count_deltas — one row per (channel, status) the statement
-- changed, from its transition tables, so a settle of 256 rows adds two or
-- three rows, not 256 — and CompactCounts folds them into
-- notification_counts every second. A count is the table's figure plus the
-- deltas not yet folded: exact as of the reading snapshot. Appending never
-- waits on another writer (no shared counter row on the hot path).
CREATE TABLE notification_counts (
    channel text COLLATE "C" NOT NULL,
    status  text NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (channel, status)
);

CREATE TABLE notification_count_deltas (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel text COLLATE "C" NOT NULL,
    status  text NOT NULL,
    d       bigint NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION notifyd_count_insert() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO notification_count_deltas (channel, status, d)
    SELECT channel, status, count(*) FROM notifyd_new GROUP BY channel, status;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION notifyd_count_update() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO notification_count_deltas (channel, status, d)
    SELECT channel, status, sum(d) FROM (
        SELECT channel, status, 1::bigint AS d FROM notifyd_new
        UNION ALL
        SELECT channel, status, -1::bigint FROM notifyd_old) x
    GROUP BY channel, status HAVING sum(d) <> 0;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION notifyd_count_delete() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO notification_count_deltas (channel, status, d)
    SELECT channel, status, -count(*) FROM notifyd_old GROUP BY channel, status;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- CREATE TRIGGER takes a lock that waits for, and then holds off, every
-- writer until this migration commits: the starting counts below and the
-- triggers see the same rows, so nothing is counted twice or missed.
CREATE TRIGGER notifications_count_insert AFTER INSERT ON notifications
    REFERENCING NEW TABLE AS notifyd_new FOR EACH STATEMENT EXECUTE FUNCTION notifyd_count_insert();
CREATE TRIGGER notifications_count_update AFTER UPDATE ON notifications
    REFERENCING OLD TABLE AS notifyd_old NEW TABLE AS notifyd_new FOR EACH STATEMENT EXECUTE FUNCTION notifyd_count_update();
CREATE TRIGGER notifications_count_delete AFTER DELETE ON notifications
    REFERENCING OLD TABLE AS notifyd_old FOR EACH STATEMENT EXECUTE FUNCTION notifyd_count_delete();

INSERT INTO notification_counts (channel, status, n)
SELECT channel, status, count(*) FROM notifications GROUP BY channel, status;

-- Retention (internal/outbox/retention.go): where the walk over notifications by
-- id has got to, and when it last started again from the oldest row.
CREATE TABLE retention_state (
    name       text PRIMARY KEY,
    cursor     bigint NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE retention_state;
DROP TRIGGER notifications_count_delete ON notifications;
DROP TRIGGER notifications_count_update ON notifications;
DROP TRIGGER notifications_count_insert ON notifications;
DROP FUNCTION notifyd_count_delete();
DROP FUNCTION notifyd_count_update();
DROP FUNCTION notifyd_count_insert();
DROP TABLE notification_count_deltas;
DROP TABLE notification_counts;
